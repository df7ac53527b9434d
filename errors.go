package delayq

import (
	"errors"
	"fmt"
	"time"
)

// Sentinel errors. Stores, the engine and the Go SDK wrap these, so
// errors.Is(err, delayq.ErrExists) means the same on both sides of the wire.
var (
	// ErrNotFound: no live job has that id or seq.
	ErrNotFound = errors.New("delayq: job not found")
	// ErrExists: a live or retained job already has that id (an
	// *ExistsError says which and in what state).
	ErrExists = errors.New("delayq: job already exists")
	// ErrNotReserved: the job is not reserved under the presented
	// reservation (it expired and another consumer may hold it), or it is
	// reserved and the call needs it not to be.
	ErrNotReserved = errors.New("delayq: job not reserved by you")
	// ErrState: the job's state does not allow the call (kicking a ready job).
	ErrState = errors.New("delayq: job is not in a state that allows this")
	// ErrDraining: the server is shutting down and takes no new work.
	ErrDraining = errors.New("delayq: server is draining")
	// ErrUnavailable: the store cannot be reached or has failed.
	ErrUnavailable = errors.New("delayq: store unavailable")
	// ErrDiskFull: the store's disk is below its free-space floor, so it
	// takes no new jobs; the jobs it has are still served.
	ErrDiskFull = errors.New("delayq: disk full")
	// ErrCorrupt: the store found data it cannot trust (a damaged WAL
	// record, sstable block or job record). The data is never served as if
	// it were good; `delayq repair` salvages what is readable.
	ErrCorrupt = errors.New("delayq: store data is corrupt")
	// ErrInvalid: the request is malformed; a *ValidationError says how.
	ErrInvalid = errors.New("delayq: invalid request")
	// ErrForbidden: the caller's token has no scope on the topic of the
	// job it named. It matches ErrInvalid too: sending the same request
	// again cannot help.
	ErrForbidden error = forbiddenError{}
	// ErrNotSupported: this server cannot serve the call the way it is
	// set up (a backup of a Redis-backed server); a *NotSupportedError
	// says what to do instead.
	ErrNotSupported = errors.New("delayq: not supported by this server")
)

// NotSupportedError is a call this server cannot serve, with what to do
// instead ("this server's store is Redis: back up Redis itself"). It
// matches ErrNotSupported.
type NotSupportedError struct {
	Reason string
}

func (e *NotSupportedError) Error() string { return e.Reason }

// Is makes a NotSupportedError match ErrNotSupported.
func (e *NotSupportedError) Is(target error) bool { return target == ErrNotSupported }

type forbiddenError struct{}

func (forbiddenError) Error() string {
	return "delayq: forbidden: this token has no scope for this call on the job's topic"
}

// Unwrap makes ErrForbidden match ErrInvalid.
func (forbiddenError) Unwrap() error { return ErrInvalid }

// ValidationError names the field and the rule a request broke. Code is the
// machine-readable name used on the wire ("bad_topic", "body_too_big", ...).
type ValidationError struct {
	Code   string
	Field  string
	Reason string
}

func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "delayq: " + e.Reason
	}
	return fmt.Sprintf("delayq: %s: %s", e.Field, e.Reason)
}

// Unwrap makes every ValidationError match ErrInvalid.
func (e *ValidationError) Unwrap() error { return ErrInvalid }

// Invalid returns a *ValidationError.
func Invalid(code, field, format string, args ...any) error {
	return &ValidationError{Code: code, Field: field, Reason: fmt.Sprintf(format, args...)}
}

// NotFoundError is not_found for what is not a job: a schedule, an alarm,
// a topic's policy. It matches ErrNotFound, so every front end answers it
// as not found, and Message shows its own words rather than the
// sentinel's, which speak of jobs.
type NotFoundError struct{ What string }

// NotFound returns a *NotFoundError whose message is the formatted text.
func NotFound(format string, args ...any) error {
	return &NotFoundError{What: fmt.Sprintf(format, args...)}
}

func (e *NotFoundError) Error() string { return e.What }

// Unwrap makes it match ErrNotFound.
func (e *NotFoundError) Unwrap() error { return ErrNotFound }

// ReplicationError: a write reached the store's primary (Redis), but
// fewer replicas than asked (--redis-wait-replicas) confirmed it within
// the timeout, so a failover now could lose it. It matches ErrUnavailable
// (HTTP 503): the caller may retry, and a retried put of the same id
// finds the job already there.
type ReplicationError struct {
	Op        string        // the write: put, reserve, finish, ...
	Wanted    int           // replicas asked for
	Confirmed int           // replicas that confirmed it; -1 when WAIT itself failed
	Timeout   time.Duration // how long WAIT waited
	Cause     error         // why WAIT failed, when it did
}

func (e *ReplicationError) Error() string {
	if e.Cause != nil {
		return e.Outcome() + ": " + e.Cause.Error()
	}
	return e.Outcome()
}

// Outcome says what became of the write, without the cause (which may name
// addresses): the text the caller is shown.
func (e *ReplicationError) Outcome() string {
	if e.Confirmed < 0 {
		return fmt.Sprintf("%s written to the primary, but waiting for %d replicas failed; it may be lost if the primary fails", e.Op, e.Wanted)
	}
	return fmt.Sprintf("%s written to the primary, confirmed by %d of %d replicas within %s; it may be lost if the primary fails", e.Op, e.Confirmed, e.Wanted, e.Timeout)
}

// Unwrap makes it match ErrUnavailable.
func (e *ReplicationError) Unwrap() error { return ErrUnavailable }

// ExistsError is the error of a put whose id is taken: by a live job,
// or by a retained one (finished, deleted or failed within the
// retention), so that a producer retrying a put after a lost reply
// learns the job is already there or already done. It matches
// ErrExists.
type ExistsError struct {
	ID    string
	State State // the job's state; "" when the store did not say
}

func (e *ExistsError) Error() string {
	if e.State == "" {
		return fmt.Sprintf("%v: %q", ErrExists, e.ID)
	}
	return fmt.Sprintf("%v: %q is %s", ErrExists, e.ID, e.State)
}

// Unwrap makes errors.Is(err, ErrExists) hold.
func (e *ExistsError) Unwrap() error { return ErrExists }
