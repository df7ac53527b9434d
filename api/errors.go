package api

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq"
)

// Error codes that stand for a delayq sentinel, as package delayq names
// them (kept here for code written against api). Validation errors carry
// their own codes (delayq.CodeBadTopic, ...) and answer 400.
const (
	CodeNotFound    = delayq.CodeNotFound
	CodeExists      = delayq.CodeExists
	CodeNotReserved = delayq.CodeNotReserved
	CodeBadState    = delayq.CodeBadState
	CodeDraining    = delayq.CodeDraining
	CodeUnavailable = delayq.CodeUnavailable
	CodeDiskFull    = delayq.CodeDiskFull
	CodeInternal    = delayq.CodeInternal
	CodeTooLarge    = delayq.CodeRequestTooLarge
	// CodeNotSupported: a call this server's setup cannot serve (501).
	CodeNotSupported = delayq.CodeNotSupported
)

// statuses maps each sentinel to its HTTP status, in one place for both
// sides of the wire.
var statuses = []struct {
	err    error
	status int
}{
	{delayq.ErrNotFound, http.StatusNotFound},
	{delayq.ErrExists, http.StatusConflict},
	{delayq.ErrNotReserved, http.StatusConflict},
	{delayq.ErrState, http.StatusConflict},
	{delayq.ErrDraining, http.StatusServiceUnavailable},
	{delayq.ErrUnavailable, http.StatusServiceUnavailable},
	{delayq.ErrDiskFull, http.StatusInsufficientStorage},
	{delayq.ErrForbidden, http.StatusForbidden},
	{delayq.ErrNotSupported, http.StatusNotImplemented},
}

// CodeOf returns the wire code and HTTP status for err. Unknown errors are
// "internal", 500.
func CodeOf(err error) (code string, status int) {
	var ve *delayq.ValidationError
	if errors.As(err, &ve) {
		return ve.Code, http.StatusBadRequest
	}
	var le *delayq.LimitError
	if errors.As(err, &le) {
		return le.Code, LimitStatus(le)
	}
	for _, s := range statuses {
		if errors.Is(err, s.err) {
			return delayq.CodeOf(err), s.status
		}
	}
	return CodeInternal, http.StatusInternalServerError
}

// ErrorOf is the error object answered for err: its code and a message
// for people (delayq.Message), never the layers it passed through.
func ErrorOf(err error) ErrorBody {
	code, _ := CodeOf(err)
	return ErrorBody{Code: code, Message: delayq.Message(err), State: StateOf(err)}
}

// StateOf is the state of the job whose id made a put fail (an
// *delayq.ExistsError's State), or "" for any other error: the
// ErrorBody's state.
func StateOf(err error) string {
	var ee *delayq.ExistsError
	if errors.As(err, &ee) {
		return string(ee.State)
	}
	return ""
}

// Err turns an error answer back into an error that wraps the matching
// delayq sentinel (or ErrInvalid for 4xx validation codes), so
// errors.Is works in clients as it does in the server.
func (e ErrorResponse) Err(status int) error { return e.Error.Err(status) }

// Err is ErrorResponse.Err for a bare error object, such as one entry of
// a batch finish's results.
func (e ErrorBody) Err(status int) error {
	re := &RemoteError{Status: status, Code: e.Code, Message: e.Message, State: e.State, sentinel: delayq.SentinelOf(e.Code)}
	switch {
	case re.sentinel != nil:
	case IsLimitCode(e.Code):
		re.sentinel = delayq.ErrLimit
	case status >= 400 && status < 500 || status == 0:
		re.sentinel = delayq.ErrInvalid
	}
	return re
}

// RemoteError is an error answered by a delayq server. Its text is the
// server's message, which names the problem ("job \"x\" not found"); the
// code is in Code for programs.
type RemoteError struct {
	Status  int
	Code    string
	Message string
	// State is, for code exists, the state of the job that has the id
	// (ErrorBody.State); "" otherwise.
	State    string
	sentinel error
}

func (e *RemoteError) Error() string { return e.Message }

// Unwrap returns the sentinel the code stands for, if any.
func (e *RemoteError) Unwrap() error { return e.sentinel }
