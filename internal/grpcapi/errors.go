package grpcapi

import (
	"context"
	"errors"
	"log/slog"

	"connectrpc.com/connect"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
)

// statusOf maps each delayq code that is not a validation or a limit
// code to its status, in one place (docs/grpc.md shows the table). Every
// validation code (bad_id, body_too_big, ...) is InvalidArgument, every
// limit code (rate_limited, topic_full, ...) ResourceExhausted (codeOf);
// an unknown error is Internal.
var statusOf = map[string]connect.Code{
	delayq.CodeNotFound:        connect.CodeNotFound,
	delayq.CodeExists:          connect.CodeAlreadyExists,
	delayq.CodeNotReserved:     connect.CodeFailedPrecondition,
	delayq.CodeBadState:        connect.CodeFailedPrecondition,
	delayq.CodeDraining:        connect.CodeUnavailable,
	delayq.CodeUnavailable:     connect.CodeUnavailable,
	delayq.CodeDiskFull:        connect.CodeResourceExhausted,
	delayq.CodeInternal:        connect.CodeInternal,
	delayq.CodeUnauthorized:    connect.CodeUnauthenticated,
	delayq.CodeForbidden:       connect.CodePermissionDenied,
	delayq.CodeHostNotAllowed:  connect.CodePermissionDenied,
	delayq.CodeRequestTooLarge: connect.CodeResourceExhausted,
	delayq.CodeNotSupported:    connect.CodeUnimplemented,
}

// refusal is an error of the checks before a call (no token, no scope,
// a request too large), with its delayq code.
type refusal struct {
	code, msg string
}

func (r *refusal) Error() string { return r.msg }

// codeOf is err's delayq code, the ErrorInfo's field and the status code
// it is answered with. A validation error is InvalidArgument whatever its
// code (bad_state names both a List of no state and the sentinel
// ErrState, which is FailedPrecondition).
func codeOf(err error) (code, field string, status connect.Code) {
	var rf *refusal
	var ve *delayq.ValidationError
	switch {
	case errors.As(err, &rf):
		code = rf.code
	case errors.As(err, &ve):
		return ve.Code, ve.Field, connect.CodeInvalidArgument
	case errors.Is(err, delayq.ErrLimit):
		return delayq.CodeOf(err), "", connect.CodeResourceExhausted
	default:
		code = delayq.CodeOf(err)
	}
	if s, ok := statusOf[code]; ok {
		return code, field, s
	}
	if errors.Is(err, delayq.ErrInvalid) {
		return code, field, connect.CodeInvalidArgument
	}
	return delayq.CodeInternal, "", connect.CodeInternal
}

// messageOf is the message answered for err: its text for people
// (delayq.Message), never the layers it went through.
func messageOf(err error) string {
	var rf *refusal
	if errors.As(err, &rf) {
		return rf.msg
	}
	return delayq.Message(err)
}

// toConnect turns an error of a call into the *connect.Error answered:
// the status code of its delayq code, its message, and an ErrorInfo
// detail with the code. A call that ended because its client went away
// or its deadline passed is Canceled or DeadlineExceeded, as gRPC
// clients expect. An internal error is logged here, once, and answered
// without its details.
func toConnect(ctx context.Context, log *slog.Logger, procedure string, err error) *connect.Error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce // already answered by the checks before the call
	}
	if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if errors.Is(err, context.DeadlineExceeded) {
			return connect.NewError(connect.CodeDeadlineExceeded, err)
		}
		return connect.NewError(connect.CodeCanceled, err)
	}
	code, field, status := codeOf(err)
	msg := messageOf(err)
	var ee *delayq.ExistsError
	var state string
	if errors.As(err, &ee) {
		state = string(ee.State) // the taken job's, so a retried put learns it is done
	}
	if status == connect.CodeInternal || status == connect.CodeUnavailable && code != delayq.CodeDraining {
		log.Error("grpc call failed", "procedure", procedure, "code", code, "err", err)
		if status == connect.CodeInternal {
			msg = "internal error; see the server log"
		}
	}
	return withInfo(status, &delayqv1.ErrorInfo{Code: code, Message: msg, Field: field, State: state})
}

// withInfo is a *connect.Error of status carrying info as its detail.
func withInfo(status connect.Code, info *delayqv1.ErrorInfo) *connect.Error {
	ce := connect.NewError(status, errors.New(info.Message))
	if d, err := connect.NewErrorDetail(info); err == nil { // it always marshals
		ce.AddDetail(d)
	}
	return ce
}

// errorInfo is err as a batch entry's error: its code and message.
func errorInfo(err error) *delayqv1.ErrorInfo {
	code, field, _ := codeOf(err)
	return &delayqv1.ErrorInfo{Code: code, Message: messageOf(err), Field: field}
}
