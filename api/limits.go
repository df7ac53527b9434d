package api

import (
	"net/http"

	"github.com/delayq/delayq"
)

// Codes of refusals by a limit or by the security checks, besides the
// codes of *delayq.LimitError that the engine names itself.
const (
	// CodeUnauthorized: no valid token (401).
	CodeUnauthorized = "unauthorized"
	// CodeForbidden: the token lacks the scope for this call or topic (403).
	CodeForbidden = "forbidden"
	// CodeHostNotAllowed: the Host header is not one of the server's
	// names, as in a DNS-rebinding attack (403).
	CodeHostNotAllowed = "host_not_allowed"
	// CodeRateLimited: the token (or address) sent more requests than its
	// rate allows (429).
	CodeRateLimited = "rate_limited"
	// CodeTooManyBytes: request bodies in flight reached their bound (503).
	CodeTooManyBytes = "too_many_bytes_in_flight"
	// CodeTooManyConns: the listener holds its most connections (503).
	CodeTooManyConns = "too_many_connections"
	// CodeTooManyWaiting: waiting reserves reached their bound (503).
	CodeTooManyWaiting = "too_many_waiting_reserves"
	// CodeTooManyTopics: a put would create a topic beyond --max-topics
	// (507). (A reserve naming too many topics is the 400 too_many_topics.)
	CodeTooManyTopics = "topic_limit"
)

// LimitStatus is the HTTP status of a limit refusal: 429 for a client's own
// rate, 507 for a quota that stays, 503 for the server's momentary load.
func LimitStatus(le *delayq.LimitError) int {
	switch {
	case le.Code == CodeRateLimited:
		return http.StatusTooManyRequests
	case !le.Retry:
		return http.StatusInsufficientStorage
	}
	return http.StatusServiceUnavailable
}

// IsLimitCode reports whether code is a refusal by a limit (the answer then
// wraps delayq.ErrLimit on the client's side): the request changed
// nothing.
func IsLimitCode(code string) bool {
	switch code {
	case CodeRateLimited, CodeTooManyBytes, CodeTooManyConns, CodeTooManyWaiting, CodeTooManyTopics:
		return true
	}
	return false
}

// IsMomentaryLimit reports whether a limit refusal may clear by itself
// (load, rate), so the same request may be sent again after a pause; the
// topic limit stays until topics are emptied.
func IsMomentaryLimit(code string) bool {
	return IsLimitCode(code) && code != CodeTooManyTopics
}
