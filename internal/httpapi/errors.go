package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// httpError is an error that is about HTTP itself (no such route, wrong
// method), not about a job, so it carries its own status and code.
type httpError struct {
	status  int
	code    string
	message string
}

func (e *httpError) Error() string { return e.message }

// writeError answers err as {"error":{"code","message"}}. It is the only
// place that maps errors to statuses: request-level errors first, then
// api.CodeOf for the engine's errors. Unknown errors answer 500 "internal"
// and are logged once, here.
func (h *handler) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code, status := api.CodeOf(err)
	msg := delayq.Message(err)
	var he *httpError
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &he):
		code, status, msg = he.code, he.status, he.message
	case errors.As(err, &mbe):
		code, status = api.CodeTooLarge, http.StatusRequestEntityTooLarge
		msg = fmt.Sprintf("request body is over the limit of %d bytes", mbe.Limit)
	}
	var le *delayq.LimitError
	if errors.As(err, &le) && le.Retry && status == http.StatusServiceUnavailable {
		// The server is at a bound (bytes in flight): the client's
		// request was fine, a retry soon may pass, and a flood of
		// refusals must not flood the log.
		w.Header().Set("Retry-After", "1")
	} else if status >= http.StatusInternalServerError && code != api.CodeDraining {
		if r.Context().Err() != nil {
			return // the client left; nobody reads the answer
		}
		h.log.Error("http request failed", "method", r.Method, "path", r.URL.Path, "code", code, "err", err)
		if code == api.CodeInternal {
			msg = "internal error; see the server log"
		}
	}
	writeJSON(w, status, api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: msg, State: api.StateOf(err)}})
}

// writeJSON answers v with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only our own wire types get here; they always marshal
		panic("httpapi: marshal answer: " + err.Error())
	}
	writeRaw(w, status, b)
}

// writeJobs answers with a list of jobs, encoded without reflection
// (JobsResponse.AppendJSON): reserve answers are the hot path.
func writeJobs(w http.ResponseWriter, r *api.JobsResponse) {
	writeRaw(w, http.StatusOK, r.AppendJSON(make([]byte, 0, 512*len(r.Jobs)+32)))
}

// putStatus is the status of a PUT that stores a document: 201 when it
// created it, 200 when it replaced one.
func putStatus(created bool) int {
	if created {
		return http.StatusCreated
	}
	return http.StatusOK
}

// writeRaw answers with b, a JSON value, and a newline.
func writeRaw(w http.ResponseWriter, status int, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// decode reads exactly one JSON value of r's body, at most limit bytes,
// into v, refusing unknown fields.
func decode(w http.ResponseWriter, r *http.Request, limit int64, v any) error {
	body, err := readBody(w, r, limit)
	if err != nil {
		return err
	}
	return decodeBytes(body, v)
}

// readBody reads the request body, at most limit bytes.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		var le *delayq.LimitError
		if errors.As(err, &mbe) || errors.As(err, &le) {
			return nil, err // answered 413, or 503 when the bytes in flight are at their bound
		}
		return nil, bodyError(r, err)
	}
	return body, nil
}

// decodeBytes is decode's parser, apart so fuzz tests can reach it.
func decodeBytes(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return delayq.Invalid(delayq.CodeBadJSON, "", "the request body is empty; send a JSON object")
	}
	if err := api.CheckUTF8(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return delayq.Invalid(delayq.CodeBadJSON, "", "the request body holds more than one JSON value")
	}
	return checkStrict(body, v)
}

// jsonError names what was wrong with a JSON body.
func jsonError(err error) error {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	var ve *delayq.ValidationError
	switch {
	case errors.As(err, &ve):
		return err
	case errors.As(err, &te) && te.Type == reflect.TypeFor[api.Duration]():
		return delayq.Invalid(durationCode(te.Field), te.Field, "%s seconds is too large (a duration is at most about 292 years)", strings.TrimPrefix(te.Value, "number "))
	case errors.As(err, &se):
		return delayq.Invalid(delayq.CodeBadJSON, "", "invalid JSON at byte %d: %s", se.Offset, se.Error())
	case errors.Is(err, io.ErrUnexpectedEOF):
		return delayq.Invalid(delayq.CodeBadJSON, "", "the JSON body ends too early")
	case errors.As(err, &te) && te.Field != "":
		return delayq.Invalid(delayq.CodeBadJSON, te.Field, "a JSON %s cannot be a %s", te.Value, te.Type)
	case errors.As(err, &te):
		return delayq.Invalid(delayq.CodeBadJSON, "", "the body must be a JSON object, not a %s", te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return delayq.Invalid(delayq.CodeUnknownField, "", "%s", strings.TrimPrefix(err.Error(), "json: "))
	}
	return delayq.Invalid(delayq.CodeBadJSON, "", "%s", strings.TrimPrefix(err.Error(), "json: "))
}

// durationCode is the code of a duration field that cannot be held,
// named by its last path element ("jobs.delay" is a delay).
func durationCode(field string) string {
	switch field[strings.LastIndex(field, ".")+1:] {
	case "delay":
		return delayq.CodeBadDelay
	case "ttr":
		return delayq.CodeBadTTR
	case "wait":
		return delayq.CodeBadWait
	}
	return delayq.CodeBadJSON
}
