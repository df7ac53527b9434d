package api

import (
	"net/http"

	"github.com/delayq/delayq"
)

// Codes of refusals by a limit or by the security checks, as package
// delayq names them (kept here for code written against api).
const (
	CodeUnauthorized   = delayq.CodeUnauthorized
	CodeForbidden      = delayq.CodeForbidden
	CodeHostNotAllowed = delayq.CodeHostNotAllowed
	CodeCrossSite      = delayq.CodeCrossSite
	CodeRateLimited    = delayq.CodeRateLimited
	CodeTooManyBytes   = delayq.CodeTooManyBytes
	CodeTooManyConns   = delayq.CodeTooManyConns
	CodeTooManyWaiting = delayq.CodeTooManyWaiting
	// CodeTopicLimit: a put would create a topic beyond --max-topics
	// (507). (A reserve naming too many topics is the 400 too_many_topics.)
	CodeTopicLimit = delayq.CodeTopicLimit
	// CodeTopicFull: a put would take a topic past its policy's max_jobs
	// (429: it clears as consumers finish the topic's jobs).
	CodeTopicFull = delayq.CodeTopicFull
)

// LimitStatus is the HTTP status of a limit refusal: 429 for a client's own
// rate or a full topic (its policy's max_jobs), 507 for a quota that
// stays, 503 for the server's momentary load.
func LimitStatus(le *delayq.LimitError) int {
	switch {
	case le.Code == CodeRateLimited, le.Code == CodeTopicFull:
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
	case CodeRateLimited, CodeTooManyBytes, CodeTooManyConns, CodeTooManyWaiting, CodeTopicLimit, CodeTopicFull:
		return true
	}
	return false
}

// IsMomentaryLimit reports whether a limit refusal may clear by itself
// (load, rate), so the same request may be sent again after a pause; the
// topic limit stays until topics are emptied, and a full topic waits on
// its consumers, which the producer should hear of rather than wait out.
func IsMomentaryLimit(code string) bool {
	return IsLimitCode(code) && code != CodeTopicLimit && code != CodeTopicFull
}
