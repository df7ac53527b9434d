package delayq

import "errors"

// ErrLimit: a configured limit was reached (connections, bytes in flight,
// waiting reserves, topics, request rate); a *LimitError names which. The
// request changed nothing and may succeed later or elsewhere.
var ErrLimit = errors.New("delayq: limit reached")

// LimitError names the limit a request ran into, so a client (and the
// operator reading its logs) knows which flag to look at. Code is the
// machine-readable name used on the wire ("too_many_topics", ...).
type LimitError struct {
	Code   string
	Reason string
	// Retry is true when the limit is momentary (a rate, a load) so the
	// same request may succeed shortly; false for a quota that stays
	// (the count of topics).
	Retry bool
}

func (e *LimitError) Error() string { return "delayq: " + e.Reason }

// Unwrap makes every LimitError match ErrLimit.
func (e *LimitError) Unwrap() error { return ErrLimit }
