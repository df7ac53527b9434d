package api

import (
	"errors"
	"net/http"

	"github.com/delayq/delayq"
)

// Error codes that stand for a delayq sentinel. Validation errors carry
// their own codes (bad_topic, body_too_big, ...) and answer 400.
const (
	CodeNotFound    = "not_found"
	CodeExists      = "exists"
	CodeNotReserved = "not_reserved"
	CodeBadState    = "bad_state"
	CodeDraining    = "draining"
	CodeUnavailable = "unavailable"
	CodeDiskFull    = "disk_full"
	CodeInternal    = "internal"
	CodeTooLarge    = "request_too_large"
)

// sentinels maps each sentinel to its code and HTTP status, in one place
// for both sides of the wire.
var sentinels = []struct {
	err    error
	code   string
	status int
}{
	{delayq.ErrNotFound, CodeNotFound, http.StatusNotFound},
	{delayq.ErrExists, CodeExists, http.StatusConflict},
	{delayq.ErrNotReserved, CodeNotReserved, http.StatusConflict},
	{delayq.ErrState, CodeBadState, http.StatusConflict},
	{delayq.ErrDraining, CodeDraining, http.StatusServiceUnavailable},
	{delayq.ErrUnavailable, CodeUnavailable, http.StatusServiceUnavailable},
	{delayq.ErrDiskFull, CodeDiskFull, http.StatusInsufficientStorage},
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
	for _, s := range sentinels {
		if errors.Is(err, s.err) {
			return s.code, s.status
		}
	}
	return CodeInternal, http.StatusInternalServerError
}

// Err turns an error answer back into an error that wraps the matching
// delayq sentinel (or ErrInvalid for 4xx validation codes), so
// errors.Is works in clients as it does in the server.
func (e ErrorResponse) Err(status int) error {
	for _, s := range sentinels {
		if s.code == e.Error.Code {
			return &RemoteError{Status: status, Code: e.Error.Code, Message: e.Error.Message, sentinel: s.err}
		}
	}
	re := &RemoteError{Status: status, Code: e.Error.Code, Message: e.Error.Message}
	switch {
	case IsLimitCode(e.Error.Code):
		re.sentinel = delayq.ErrLimit
	case status >= 400 && status < 500:
		re.sentinel = delayq.ErrInvalid
	}
	return re
}

// RemoteError is an error answered by a delayq server.
type RemoteError struct {
	Status   int
	Code     string
	Message  string
	sentinel error
}

func (e *RemoteError) Error() string { return e.Message + " (" + e.Code + ")" }

// Unwrap returns the sentinel the code stands for, if any.
func (e *RemoteError) Unwrap() error { return e.sentinel }
