package httpapi

import (
	"errors"
	"net/http"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// reserve: POST /v1/reserve {"topics","n"?,"wait"?} → 200 {"jobs":[...]}.
// The wait ends with the request's context, so a client that hangs up
// stops waiting; the engine gives back any job reserved for it meanwhile,
// at no cost of an attempt.
func (h *handler) reserve(w http.ResponseWriter, r *http.Request) {
	var req api.ReserveRequest
	if err := decode(w, r, smallRequest, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	er := engine.ReserveRequest{Topics: req.Topics, N: req.N, By: reserver(r)}
	if req.Wait != nil {
		er.Wait = time.Duration(*req.Wait)
	}
	jobs, err := h.e.Reserve(r.Context(), er)
	if err != nil {
		if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
			return // the client left; there is no one to answer
		}
		h.writeError(w, r, err)
		return
	}
	writeJobs(w, &api.JobsResponse{Jobs: api.FromJobs(jobs)})
}

// reserver names r's caller in the attempts it reserves (Job.History):
// its principal, or on a server without tokens ("open") the client's
// address, which is all that tells one consumer from another there.
func reserver(r *http.Request) string {
	if c, ok := auth.CallerOf(r.Context()); ok && c.Principal != nil && c.Principal != auth.Open {
		return c.Principal.Name
	}
	return "http " + r.RemoteAddr
}
