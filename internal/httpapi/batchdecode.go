package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// decodeBatch reads a batch put's body as a stream: {"jobs":[...]} token by
// token, one job at a time, so the request's bytes are never held whole
// next to the decoded jobs (io.ReadAll of a full batch took up to ~91 MB
// before parsing began), and a batch over delayq.MaxBatch is refused as
// soon as its job MaxBatch+1 starts, without reading the rest.
func decodeBatch(w http.ResponseWriter, r *http.Request, limit int64, req *api.BatchRequest) error {
	return decodeBatchFrom(readErrors{r, http.MaxBytesReader(w, r.Body, limit)}, req)
}

// decodeBatchFrom is decodeBatch's parser, apart so fuzz tests can reach it.
func decodeBatchFrom(body io.Reader, req *api.BatchRequest) error {
	tee := &teeReader{r: body}
	dec := json.NewDecoder(tee)
	dec.DisallowUnknownFields()
	tok, err := dec.Token()
	if err == io.EOF {
		return delayq.Invalid(delayq.CodeBadJSON, "", "the request body is empty; send a JSON object")
	}
	if err != nil {
		return streamError(err)
	}
	switch tok {
	case nil:
		return delayq.Invalid(delayq.CodeBadJSON, "", "the body is null; send a JSON object")
	case json.Delim('{'):
	default:
		return delayq.Invalid(delayq.CodeBadJSON, "", "the body must be a JSON object")
	}
	seen := false
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return streamError(err)
		}
		switch key, _ := tok.(string); {
		case key == "jobs" && seen:
			return delayq.Invalid(delayq.CodeDuplicateField, "jobs", "given twice; give each field once")
		case key == "jobs":
			seen = true
		case strings.EqualFold(key, "jobs"):
			return delayq.Invalid(delayq.CodeUnknownField, key, "unknown field; field names are case-sensitive: did you mean \"jobs\"?")
		default:
			return delayq.Invalid(delayq.CodeUnknownField, "", "unknown field %q", key)
		}
		if err := decodeBatchJobs(dec, tee, req); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // the closing '}'
		return streamError(err)
	}
	return expectEOF(dec)
}

// expectEOF refuses anything after the body's one JSON value.
func expectEOF(dec *json.Decoder) error {
	if _, err := dec.Token(); err != io.EOF {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return err
		}
		return delayq.Invalid(delayq.CodeBadJSON, "", "the request body holds more than one JSON value")
	}
	return nil
}

// decodeBatchJobs reads the value of "jobs": null or an array of jobs.
func decodeBatchJobs(dec *json.Decoder, tee *teeReader, req *api.BatchRequest) error {
	req.Jobs = req.Jobs[:0]
	tok, err := dec.Token()
	if err != nil {
		return streamError(err)
	}
	if tok == nil {
		return nil
	}
	if tok != json.Delim('[') {
		return delayq.Invalid(delayq.CodeBadJSON, "jobs", "jobs must be an array of jobs")
	}
	for dec.More() {
		if len(req.Jobs) == delayq.MaxBatch {
			return delayq.Invalid(delayq.CodeBatchTooBig, "jobs", "%d jobs or more in one batch, at most %d", delayq.MaxBatch+1, delayq.MaxBatch)
		}
		// Each job is decoded, then its bytes, which the tee kept, are
		// checked strictly (checkStrict: exact field names, none twice).
		// Decoding from the bytes instead would scan every job twice.
		i := len(req.Jobs)
		req.Jobs = append(req.Jobs, api.PutRequest{})
		start := dec.InputOffset()
		if err := dec.Decode(&req.Jobs[i]); err != nil {
			return inJob(streamError(err), i)
		}
		end := dec.InputOffset()
		raw := tee.span(start, end)
		if string(raw) == "null" {
			return delayq.Invalid(delayq.CodeBadJSON, "jobs["+itoa(i)+"]", "is null; send a job object")
		}
		if err := checkStrict(raw, &req.Jobs[i]); err != nil {
			return inJob(err, i)
		}
		tee.forget(end)
	}
	if _, err := dec.Token(); err != nil { // the closing ']'
		return streamError(err)
	}
	return nil
}

// streamError keeps a body-size error as it is (it answers 413) and names
// JSON errors as decode does.
func streamError(err error) error {
	var mbe *http.MaxBytesError
	var le *delayq.LimitError // the bytes in flight at their bound (limits.Bytes): 503
	if errors.As(err, &mbe) || errors.As(err, &le) {
		return err
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if _, ok := err.(*delayq.ValidationError); ok {
		return err
	}
	return jsonError(fmt.Errorf("%w", err))
}

// teeReader keeps the bytes read through it from the oldest one still
// wanted, so the batch decoder can look at a job's own bytes after
// json.Decoder decoded them. It keeps about one job, not the body.
type teeReader struct {
	r    io.Reader
	buf  []byte
	base int64 // the input offset of buf[0]
}

func (t *teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.buf = append(t.buf, p[:n]...)
	return n, err
}

// span returns the input from offset start to end, without the
// separators json.Decoder had not consumed at start (spaces, a comma).
// It is valid until the next forget.
func (t *teeReader) span(start, end int64) []byte {
	raw := t.buf[start-t.base : end-t.base]
	for len(raw) > 0 && (raw[0] == ',' || raw[0] == ' ' || raw[0] == '\t' || raw[0] == '\r' || raw[0] == '\n') {
		raw = raw[1:]
	}
	return raw
}

// forget drops the input before offset end.
func (t *teeReader) forget(end int64) {
	n := copy(t.buf, t.buf[end-t.base:])
	t.buf = t.buf[:n]
	t.base = end
}
