package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/audit"
	"github.com/delayq/delayq/internal/engine"
)

// command serves the original protocol on POST / and POST /v1/command:
// {"command":"add"|"pop"|"finish"|"delete", ...} answered by
// {"success","error","id","value"}. Every request it understood answers
// 200 (success false on failure); a body that is not JSON answers 400.
func (h *handler) command(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, h.oneJobBytes))
	var mbe *http.MaxBytesError
	var le *delayq.LimitError
	switch {
	case errors.As(err, &mbe):
		writeJSON(w, http.StatusRequestEntityTooLarge, failed(err))
		return
	case errors.As(err, &le): // the bytes in flight at their bound
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, failed(err))
		return
	case err != nil:
		return // the client's connection broke mid-request
	case !json.Valid(body):
		writeJSON(w, http.StatusBadRequest, api.CommandResponse{Error: "the request body is not JSON"})
		return
	}
	writeJSON(w, http.StatusOK, h.runCommand(r, body))
}

// commands maps each command of the original protocol to its method.
var commands = map[string]func(*handler, *http.Request, *api.CommandRequest) (api.CommandResponse, error){
	"add":    (*handler).cmdAdd,
	"pop":    (*handler).cmdPop,
	"finish": (*handler).cmdFinish,
	"delete": (*handler).cmdDeleteAudited,
}

// runCommand decodes and runs one valid-JSON command.
func (h *handler) runCommand(r *http.Request, body []byte) api.CommandResponse {
	var req api.CommandRequest
	if err := api.CheckUTF8(body); err != nil {
		return failed(err)
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return failed(jsonError(err))
	}
	run, ok := commands[strings.ToLower(req.Command)]
	if !ok {
		return api.CommandResponse{Error: "unknown command " + quote(req.Command) + " (use add, pop, finish or delete)"}
	}
	resp, err := run(h, r, &req)
	if err != nil {
		if code, status := api.CodeOf(err); status >= http.StatusInternalServerError && code != api.CodeDraining && r.Context().Err() == nil {
			h.log.Error("original-protocol command failed", "command", req.Command, "err", err)
		}
		return failed(err)
	}
	resp.Success = true
	return resp
}

// cmdAdd: {"command":"add","topic","id","delay","TTR","body"}; delay and
// TTR in seconds, TTR 60 when absent; a non-string body is kept as its
// JSON text.
func (h *handler) cmdAdd(r *http.Request, req *api.CommandRequest) (api.CommandResponse, error) {
	// The protocol has no max_attempts or priority: the engine fills
	// them, and the ttr when TTR is absent (a topic policy's, or 60 s).
	p := engine.PutRequest{ID: req.ID, Topic: req.Topic}
	var err error
	if p.Body, err = commandBody(req.Body); err != nil {
		return api.CommandResponse{}, err
	}
	delay, err := seconds("delay", req.Delay, 0)
	if err != nil {
		return api.CommandResponse{}, err
	}
	p.Delay = &delay
	if req.TTR != nil {
		ttr, err := seconds("TTR", req.TTR, 0)
		if err != nil {
			return api.CommandResponse{}, err
		}
		p.TTR = &ttr
	}
	jobs, err := h.e.Put(r.Context(), []engine.PutRequest{p})
	if err != nil {
		return api.CommandResponse{}, err
	}
	return api.CommandResponse{ID: jobs[0].ID}, nil
}

// cmdPop: {"command":"pop","topic","timeout"?}. Nothing ready answers
// success with an empty id and value.
func (h *handler) cmdPop(r *http.Request, req *api.CommandRequest) (api.CommandResponse, error) {
	wait, err := seconds("timeout", req.Timeout, 0)
	if err != nil {
		return api.CommandResponse{}, err
	}
	jobs, err := h.e.Reserve(r.Context(), engine.ReserveRequest{Topics: []string{req.Topic}, N: 1, Wait: wait, By: reserver(r)})
	if err != nil || len(jobs) == 0 {
		return api.CommandResponse{}, err
	}
	return api.CommandResponse{ID: jobs[0].ID, Value: string(jobs[0].Body)}, nil
}

// cmdDelete serves delete: by id alone, whoever holds the job
// (the original protocol has no reservations; v1 is stricter).
func (h *handler) cmdDelete(r *http.Request, req *api.CommandRequest) (api.CommandResponse, error) {
	if req.ID == "" {
		return api.CommandResponse{}, delayq.CheckID(req.ID) // a ref without id or seq names nothing
	}
	j, err := h.e.Delete(r.Context(), delayq.Ref{ID: req.ID}, true)
	if err != nil {
		return api.CommandResponse{}, err
	}
	return api.CommandResponse{ID: j.ID}, nil
}

// cmdFinish serves finish: by id alone, whoever holds the job, as the
// original protocol has no reservations; the engine finishes it under
// the reservation it holds, so it is kept as finished.
func (h *handler) cmdFinish(r *http.Request, req *api.CommandRequest) (api.CommandResponse, error) {
	if req.ID == "" {
		return api.CommandResponse{}, delayq.CheckID(req.ID) // a ref without id or seq names nothing
	}
	j, err := h.e.FinishByID(r.Context(), req.ID)
	if err != nil {
		return api.CommandResponse{}, err
	}
	return api.CommandResponse{ID: j.ID}, nil
}

// cmdDeleteAudited serves delete, an operator's revoke (finish is the
// consumer's, on the hot path), and writes its audit record.
func (h *handler) cmdDeleteAudited(r *http.Request, req *api.CommandRequest) (api.CommandResponse, error) {
	resp, err := h.cmdDelete(r, req)
	a := audit.Actor{Protocol: "json", Remote: r.RemoteAddr}
	if in := audit.ActorOf(r.Context()); in != nil {
		a.Principal, a.Remote = in.Principal, in.Remote
	}
	audit.Log(r.Context(), h.log, &a, "job.delete", "job:"+req.ID, audit.Outcome(err))
	return resp, err
}

// commandBody is the stored body: a JSON string's text, any other JSON
// value compacted; absent or null is empty.
func commandBody(raw json.RawMessage) ([]byte, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return []byte{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, delayq.Invalid(delayq.CodeBadBody, "body", "not a JSON string: %v", err)
		}
		return []byte(s), nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return nil, delayq.Invalid(delayq.CodeBadBody, "body", "not JSON: %v", err)
	}
	return b.Bytes(), nil
}

// seconds turns a number of seconds into a duration (def when absent),
// refusing what a duration cannot hold. It compares in nanoseconds, ≥ 2^63:
// a float64 just under the limit in seconds can round up to 2^63 ns,
// which would wrap to a negative duration.
func seconds(field string, v *float64, def time.Duration) (time.Duration, error) {
	if v == nil {
		return def, nil
	}
	ns := *v * float64(time.Second)
	if math.IsNaN(ns) || ns >= 1<<63 || ns < -(1<<63) {
		return 0, delayq.Invalid(secondsCodes[field], field, "%v seconds is out of range", *v)
	}
	return time.Duration(ns), nil
}

// secondsCodes names the code of each field seconds reads.
var secondsCodes = map[string]string{"delay": delayq.CodeBadDelay, "TTR": delayq.CodeBadTTR, "timeout": delayq.CodeBadTimeout}

// failed is the answer to a command that failed with err.
func failed(err error) api.CommandResponse {
	if errors.As(err, new(*http.MaxBytesError)) {
		return api.CommandResponse{Error: "request body is too large"}
	}
	return api.CommandResponse{Error: delayq.Message(err), State: api.StateOf(err)}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
