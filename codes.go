package delayq

import (
	"errors"
	"strings"
)

// Error codes: the machine-readable name of every failure, the same on
// every front end and in every client. The engine is the only place that
// chooses a validation code; front ends and clients only carry it.
const (
	// Codes of the sentinel errors.
	CodeNotFound    = "not_found"
	CodeExists      = "exists"
	CodeNotReserved = "not_reserved"
	CodeBadState    = "bad_state" // also a List request naming no state
	CodeDraining    = "draining"
	CodeUnavailable = "unavailable"
	CodeDiskFull    = "disk_full"
	CodeInternal    = "internal"
	// CodeNotSupported: a call this server's setup cannot serve (501).
	CodeNotSupported = "not_supported"

	// Codes of refusals by a limit (a *LimitError's Code) or by the
	// security checks; the request changed nothing.
	CodeUnauthorized   = "unauthorized"              // no valid token (401)
	CodeForbidden      = "forbidden"                 // the token lacks the scope (403)
	CodeHostNotAllowed = "host_not_allowed"          // Host is not one of the server's names (403)
	CodeCrossSite      = "cross_site"                // a backup asked for by another site's page (403)
	CodeRateLimited    = "rate_limited"              // the token's request rate (429)
	CodeTooManyBytes   = "too_many_bytes_in_flight"  // request bodies in flight (503)
	CodeTooManyConns   = "too_many_connections"      // the listener's connections (503)
	CodeTooManyWaiting = "too_many_waiting_reserves" // waiting reserves (503)
	CodeTopicLimit     = "topic_limit"               // a put would create a topic beyond --max-topics (507)
	CodeTopicFull      = "topic_full"                // a put beyond its topic policy's max_jobs (429)

	// CodeMethodNotAllowed answers an HTTP request whose path exists but
	// not with its method (405); only the HTTP API has methods.
	CodeMethodNotAllowed = "method_not_allowed"

	// Validation codes (a *ValidationError's Code).
	CodeBadJSON         = "bad_json"
	CodeUnknownField    = "unknown_field" // also a key in the wrong case: names are case-sensitive
	CodeDuplicateField  = "duplicate_field"
	CodeBadTopic        = "bad_topic"
	CodeBadTopics       = "bad_topics"
	CodeTooManyTopics   = "too_many_topics"
	CodeBadID           = "bad_id"
	CodeBadBody         = "bad_body"
	CodeBodyTooBig      = "body_too_big"
	CodeBadDelay        = "bad_delay"
	CodeBadAt           = "bad_at"
	CodeBadTTR          = "bad_ttr"
	CodeBadMaxAttempts  = "bad_max_attempts"
	CodeBadBatch        = "bad_batch"
	CodeBatchTooBig     = "batch_too_big"
	CodeBadN            = "bad_n"
	CodeBadWait         = "bad_wait"
	CodeWaitTooLong     = "wait_too_long"
	CodeBadReservation  = "bad_reservation"
	CodeBadReason       = "bad_reason"
	CodeBadLimit        = "bad_limit"
	CodeBadCursor       = "bad_cursor"
	CodeBadTimeout      = "bad_timeout"
	CodeBadUTF8         = "bad_utf8"
	CodeRequestTooLarge = "request_too_large"
	CodeMalformedBody   = "malformed_body"    // the body could not be read: a bad chunk, cut short
	CodeBadPolicy       = "bad_policy"        // a topic policy that sets nothing
	CodeBadBackoff      = "bad_backoff"       // a policy's backoff: initial, max, factor or jitter
	CodeBadMaxJobs      = "bad_max_jobs"      // a policy's max_jobs
	CodeBadAlarmFormat  = "bad_alarm_format"  // an alarm's format: not delayq, alertmanager or slack
	CodeBadAlarmHeader  = "bad_alarm_header"  // an alarm's custom header: a bad or reserved name, a bad value, too many
	CodeBadAlarmSecret  = "bad_alarm_secret"  // an alarm's secret: too long, or the mask with no secret to keep
	CodeBadAlarmName    = "bad_alarm_name"    // an alarm's name: empty, too long, or outside [A-Za-z0-9_.-]
	CodeNoCondition     = "no_condition"      // an alarm whose when sets no condition
	CodeBadCondition    = "bad_condition"     // an alarm condition's threshold: negative, or not a count
	CodeBadRepeat       = "bad_repeat"        // an alarm's repeat: negative or under the minimum
	CodeBadURL          = "bad_url"           // an alarm's url: missing, too long, not http(s), no host
	CodeBadScheduleName = "bad_schedule_name" // a schedule's name: empty, too long, or outside [A-Za-z0-9_.-]
	CodeBadCron         = "bad_cron"          // a schedule's cron: unparsable, a zone in the spec, or with every
	CodeBadEvery        = "bad_every"         // a schedule's every: zero, negative or under the minimum
	CodeCronNeverFires  = "cron_never_fires"  // a cron spec that parses but names no time that exists
	CodeBadTimezone     = "bad_timezone"      // a schedule's timezone: not an IANA zone, or "Local"
	CodeBadMissed       = "bad_missed"        // a schedule's missed: not skip, one or all
	CodeBadPause        = "bad_pause"         // a topic pause's for: not a positive duration
	CodeBadWithin       = "bad_within"        // a due count's within: not 1-10 durations above 0, at most 100 years
	CodeBadRange        = "bad_range"         // a chart history's range: not a duration above 0 and at most 7 days
)

// sentinelCodes pairs each sentinel with its code.
var sentinelCodes = []struct {
	err  error
	code string
}{
	{ErrNotFound, CodeNotFound},
	{ErrExists, CodeExists},
	{ErrNotReserved, CodeNotReserved},
	{ErrState, CodeBadState},
	{ErrDraining, CodeDraining},
	{ErrUnavailable, CodeUnavailable},
	{ErrDiskFull, CodeDiskFull},
	{ErrForbidden, CodeForbidden},
	{ErrNotSupported, CodeNotSupported},
}

// CodeOf returns the code of err: a validation error's own code, the
// code of the sentinel it wraps, or CodeInternal. Metrics label outcomes
// with it and the HTTP API answers it.
func CodeOf(err error) string {
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve.Code
	}
	var le *LimitError
	if errors.As(err, &le) {
		return le.Code
	}
	for _, s := range sentinelCodes {
		if errors.Is(err, s.err) {
			return s.code
		}
	}
	return CodeInternal
}

// SentinelOf returns the sentinel error that code stands for, or nil.
func SentinelOf(code string) error {
	for _, s := range sentinelCodes {
		if s.code == code {
			return s.err
		}
	}
	return nil
}

// JobError is a sentinel error about one job, named for people:
// `job "nosuch" not found` rather than the layers it passed through.
// The engine wraps the stores' errors in it, so every front end reports
// the same words.
type JobError struct {
	Ref Ref
	Err error // the sentinel: ErrNotFound, ErrExists, ErrNotReserved or ErrState
	// Cause is the error as the store gave it, kept for logs.
	Cause error
	// Detail, when set, replaces the sentinel's words after the job's
	// name ("is reserved; ...") where the caller knows better.
	Detail string
}

func (e *JobError) Error() string {
	name := "job " + e.Ref.String()
	if e.Detail != "" {
		return name + " " + e.Detail
	}
	switch e.Err {
	case ErrNotFound:
		return name + " not found"
	case ErrExists:
		return name + " already exists"
	case ErrNotReserved:
		return name + " is not reserved by you"
	case ErrState:
		return name + " is not in a state that allows this"
	}
	return name + ": " + Message(e.Err)
}

// Unwrap returns the sentinel and the store's error.
func (e *JobError) Unwrap() []error { return []error{e.Err, e.Cause} }

// ForJob names ref in err when err is one of the sentinels about a job;
// other errors pass through unchanged.
func ForJob(ref Ref, err error) error { return ForJobDetail(ref, err, nil) }

// ForJobDetail is ForJob with words of the caller's for some sentinels
// (detail[ErrState] = "is ready, not buried or delayed").
func ForJobDetail(ref Ref, err error, detail map[error]string) error {
	if err == nil {
		return nil
	}
	var je *JobError
	if errors.As(err, &je) {
		return err
	}
	for _, s := range []error{ErrNotFound, ErrExists, ErrNotReserved, ErrState} {
		if errors.Is(err, s) {
			return &JobError{Ref: ref, Err: s, Cause: err, Detail: detail[s]}
		}
	}
	return err
}

// Message is err's text for people: what is wrong, without the layers
// (store, engine, package prefixes) it passed through. Errors it does not
// know keep their own text.
func Message(err error) string {
	var ve *ValidationError
	var je *JobError
	var nf *NotFoundError
	var ns *NotSupportedError
	switch {
	case errors.As(err, &ns):
		return ns.Reason
	case errors.As(err, &ve):
		if ve.Field == "" {
			return ve.Reason
		}
		return ve.Field + ": " + ve.Reason
	case errors.As(err, &je):
		return je.Error()
	case errors.As(err, &nf):
		return nf.Error()
	}
	if le := (*LimitError)(nil); errors.As(err, &le) {
		return le.Reason
	}
	if re := (*ReplicationError)(nil); errors.As(err, &re) {
		// The caller must learn that the write is on the primary, so it
		// knows a retry of a put finds the job there.
		return re.Outcome()
	}
	if errors.Is(err, ErrUnavailable) {
		// The cause (a Redis or disk error) is for the operator's log,
		// where the server writes it; the caller learns what failed.
		return "store unavailable; the server log says why"
	}
	for _, s := range sentinelCodes {
		if errors.Is(err, s.err) {
			return strings.TrimPrefix(s.err.Error(), "delayq: ")
		}
	}
	return err.Error()
}
