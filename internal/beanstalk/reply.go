package beanstalk

import (
	"context"
	"errors"

	"github.com/delayq/delayq"
)

// protoError is a reply the protocol defines as an error line.
type protoError string

func (e protoError) Error() string { return "beanstalk: " + string(e) }

// The protocol's error replies that come from the front end itself.
const (
	errBadFormat      protoError = "BAD_FORMAT"
	errUnknownCommand protoError = "UNKNOWN_COMMAND"
	errJobTooBig      protoError = "JOB_TOO_BIG"
	errExpectedCRLF   protoError = "EXPECTED_CRLF"
	errDeadlineSoon   protoError = "DEADLINE_SOON"
	errTimedOut       protoError = "TIMED_OUT"
	errNotFound       protoError = "NOT_FOUND"
	errNotIgnored     protoError = "NOT_IGNORED"
	errInternal       protoError = "INTERNAL_ERROR"
	errOutOfMemory    protoError = "OUT_OF_MEMORY"
)

// replyLine maps any error a command returns to its reply line: the one
// place where engine errors become protocol words. It reports whether the
// error was unexpected, so the caller logs it once.
func replyLine(err error) (line string, unexpected bool) {
	var pe protoError
	var ve *delayq.ValidationError
	switch {
	case errors.As(err, &pe):
		return string(pe), false
	case errors.Is(err, delayq.ErrNotFound), errors.Is(err, delayq.ErrNotReserved), errors.Is(err, delayq.ErrState):
		// beanstalkd answers NOT_FOUND for a job that is missing, held by
		// another connection, or in a state the command cannot act on.
		return "NOT_FOUND", false
	case errors.Is(err, delayq.ErrDraining):
		return "DRAINING", false
	case errors.Is(err, delayq.ErrDiskFull):
		// beanstalkd's answer when it cannot take a job.
		return "OUT_OF_MEMORY", false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		// Only a reserve is cut short by its client hanging up (or by a
		// shutdown); beanstalkd answers a half-closed waiter TIMED_OUT.
		return "TIMED_OUT", false
	case errors.Is(err, delayq.ErrLimit):
		// A bound of the server (waiting reserves, topics): the protocol's
		// word for "cannot take this now, try again later".
		return "OUT_OF_MEMORY", false
	case errors.As(err, &ve) && ve.Code == delayq.CodeBodyTooBig:
		return "JOB_TOO_BIG", false
	case errors.As(err, &ve):
		return "BAD_FORMAT", false
	}
	return "INTERNAL_ERROR", true
}

// reply writes the reply line of err and logs errors nobody expected.
func (c *conn) reply(err error) {
	line, unexpected := replyLine(err)
	if unexpected {
		c.srv.logger().Error("beanstalk command failed", "remote", c.remote, "err", err)
	}
	c.writeLine(line)
}
