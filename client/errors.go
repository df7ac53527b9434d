package client

import (
	"errors"
	"time"
)

// Causes a handler's context can be cancelled with; read them with
// context.Cause(ctx).
var (
	// ErrTTR: the job's reservation is about to run out (a safety margin
	// before its deadline), so its result would come too late to count.
	ErrTTR = errors.New("client: job's TTR is running out")
	// ErrShutdown: the consumer is stopping and the grace period is over.
	ErrShutdown = errors.New("client: consumer shut down")
	// ErrLost: a touch found the job no longer reserved by this consumer.
	ErrLost = errors.New("client: job's reservation was lost")
)

// permanentError marks a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return "permanent: " + e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// Permanent wraps err to tell the consumer not to retry the job: it is
// buried (dead-lettered) for an operator to inspect and kick. Permanent(nil)
// is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err}
}

// IsPermanent reports whether err, or an error it wraps, came from Permanent.
func IsPermanent(err error) bool {
	var p *permanentError
	return errors.As(err, &p)
}

// retryAfterError carries the delay a handler asked for.
type retryAfterError struct {
	err error
	d   time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// RetryAfter wraps err to have the consumer release the job with delay d
// instead of its backoff (say, a rate limit's Retry-After). RetryAfter(nil,
// d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err, d}
}

// retryDelay returns the delay asked with RetryAfter, if any.
func retryDelay(err error) (time.Duration, bool) {
	var r *retryAfterError
	if errors.As(err, &r) {
		return max(r.d, 0), true
	}
	return 0, false
}
