// Package httpapi is delayq's HTTP/JSON front end: the v1 API
// (/v1/topics, /v1/jobs, /v1/reserve, ...), the original {"command": ...}
// protocol on POST / and POST /v1/command, health, metrics and the
// dashboard mount.
//
// It translates requests to engine calls and engine results to the wire
// types of package api, and nothing else: it owns no queue state,
// implements no queue semantics and validates nothing the engine can see
// (it refuses only what cannot be translated: JSON that is not the
// request's shape or not valid UTF-8, base64 that does not decode, a
// duration too large to hold). Every error answer goes through one
// function, writeError, which maps errors with api.CodeOf and words them
// with delayq.Message.
//
// Answers not pinned by DESIGN.md: finish, delete, release, touch, bury,
// kick of one job and PATCH answer 200 with the job object (finish: the
// job as it now is, finished; delete: the job as it was); a topic kick answers {"kicked": n, "state":
// "buried"|"delayed"}; a batch finish answers 200 with one result per
// entry, in request order, whatever each entry's outcome; unknown
// routes answer 404 not_found and wrong methods 405 method_not_allowed, as
// JSON error objects. v1 bodies refuse unknown fields (unknown_field); the
// original protocol ignores them, as its first servers did.
package httpapi
