package httpapi

import (
	"net/http"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
)

// putJob: POST /v1/topics/{topic}/jobs → 201 {"id","seq"}.
func (h *handler) putJob(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req api.PutRequest
	if err := decode(w, r, h.oneJobBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := chargePut(r.Context(), &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := toPut(topic, &req)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	jobs, err := h.e.Put(r.Context(), []engine.PutRequest{p})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, api.PutResponse{ID: jobs[0].ID, Seq: jobs[0].Seq})
}

// putBatch: POST /v1/topics/{topic}/jobs/batch → 201 {"jobs":[{"id","seq"}]},
// all or nothing.
func (h *handler) putBatch(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req api.BatchRequest
	if err := decodeBatch(w, r, h.opts.MaxRequestBytes, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	puts := make([]engine.PutRequest, len(req.Jobs))
	for i := range req.Jobs {
		if err := chargePut(r.Context(), &req.Jobs[i]); err != nil {
			h.writeError(w, r, err)
			return
		}
		if puts[i], err = toPut(topic, &req.Jobs[i]); err != nil {
			h.writeError(w, r, inJob(err, i))
			return
		}
		// The wire strings are done with: let the collector have them
		// while the store copies the bodies.
		req.Jobs[i] = api.PutRequest{}
	}
	jobs, err := h.e.Put(r.Context(), puts)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := api.BatchResponse{Jobs: make([]api.PutResponse, len(jobs))}
	for i, j := range jobs {
		resp.Jobs[i] = api.PutResponse{ID: j.ID, Seq: j.Seq}
	}
	writeJSON(w, http.StatusCreated, resp)
}

// inJob names the batch element a validation error is about.
func inJob(err error, i int) error {
	ve, ok := err.(*delayq.ValidationError)
	if !ok {
		return err
	}
	c := *ve
	c.Field = "jobs[" + itoa(i) + "]." + c.Field
	if ve.Field == "" {
		c.Field = "jobs[" + itoa(i) + "]"
	}
	return &c
}

// getJob: GET /v1/jobs/{id}.
func (h *handler) getJob(w http.ResponseWriter, r *http.Request) {
	h.jobCall(w, r, func(ref delayq.Ref) (*delayq.Job, error) { return h.e.Get(r.Context(), ref) })
}

// deleteJob: DELETE /v1/jobs/{id}, in any state (an operator's revoke).
func (h *handler) deleteJob(w http.ResponseWriter, r *http.Request) {
	h.jobCall(w, r, func(ref delayq.Ref) (*delayq.Job, error) { return h.e.Delete(r.Context(), ref, true) })
}

// kickJob: POST /v1/jobs/{id}/kick; any request body is ignored.
func (h *handler) kickJob(w http.ResponseWriter, r *http.Request) {
	h.jobCall(w, r, func(ref delayq.Ref) (*delayq.Job, error) { return h.e.KickJob(r.Context(), ref) })
}

// updateJob: PATCH /v1/jobs/{id}.
func (h *handler) updateJob(w http.ResponseWriter, r *http.Request) {
	var req api.UpdateRequest
	h.jobCallWith(w, r, h.oneJobBytes, &req, func(ref delayq.Ref) (*delayq.Job, error) {
		body, err := api.DecodeBody(req.Body, req.BodyBase64)
		if err != nil {
			return nil, err
		}
		u := engine.UpdateRequest{Ref: ref, Body: body, Priority: req.Priority}
		u.Delay, u.At = when(req.Delay, req.At)
		return h.e.Update(r.Context(), u)
	})
}

// finishJob: POST /v1/jobs/{id}/finish {"reservation"}.
func (h *handler) finishJob(w http.ResponseWriter, r *http.Request) {
	var req api.ActionRequest
	h.jobCallWith(w, r, smallRequest, &req, func(ref delayq.Ref) (*delayq.Job, error) {
		ref.Reservation = req.Reservation
		return h.e.Finish(r.Context(), ref)
	})
}

// touchJob: POST /v1/jobs/{id}/touch {"reservation"}.
func (h *handler) touchJob(w http.ResponseWriter, r *http.Request) {
	var req api.ActionRequest
	h.jobCallWith(w, r, smallRequest, &req, func(ref delayq.Ref) (*delayq.Job, error) {
		ref.Reservation = req.Reservation
		return h.e.Touch(r.Context(), ref)
	})
}

// buryJob: POST /v1/jobs/{id}/bury {"reservation","priority"?,"reason"?}.
func (h *handler) buryJob(w http.ResponseWriter, r *http.Request) {
	var req api.ActionRequest
	h.jobCallWith(w, r, smallRequest, &req, func(ref delayq.Ref) (*delayq.Job, error) {
		ref.Reservation = req.Reservation
		return h.e.Bury(r.Context(), engine.BuryRequest{Ref: ref, Priority: req.Priority, Reason: req.Reason})
	})
}

// releaseJob: POST /v1/jobs/{id}/release {"reservation","delay"?,"priority"?,"reason"?}.
func (h *handler) releaseJob(w http.ResponseWriter, r *http.Request) {
	var req api.ReleaseRequest
	h.jobCallWith(w, r, smallRequest, &req, func(ref delayq.Ref) (*delayq.Job, error) {
		ref.Reservation = req.Reservation
		rel := engine.ReleaseRequest{Ref: ref, Priority: req.Priority, Reason: req.Reason}
		if req.Delay != nil {
			rel.Delay = time.Duration(*req.Delay)
		}
		return h.e.Release(r.Context(), rel)
	})
}

// smallRequest bounds the bodies that hold no job body (actions, reserve,
// kick): a reserve naming 1,000 topics of 200 bytes fits.
const smallRequest = 1 << 20

// jobCall runs call on the job named by the path's {id} and answers the
// job it returns.
func (h *handler) jobCall(w http.ResponseWriter, r *http.Request, call func(delayq.Ref) (*delayq.Job, error)) {
	j, err := call(delayq.Ref{ID: r.PathValue("id")})
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	hideReservations(r, j)
	writeJSON(w, http.StatusOK, api.FromJob(j))
}

// jobCallWith is jobCall for calls with a JSON request body, decoded into
// req (at most limit bytes) before call runs.
func (h *handler) jobCallWith(w http.ResponseWriter, r *http.Request, limit int64, req any, call func(delayq.Ref) (*delayq.Job, error)) {
	h.jobCall(w, r, func(ref delayq.Ref) (*delayq.Job, error) {
		if err := decode(w, r, limit, req); err != nil {
			return nil, err
		}
		return call(ref)
	})
}

// pathTopic returns the path's {topic}, decoded and checked.
func pathTopic(r *http.Request) (string, error) {
	t := r.PathValue("topic")
	return t, delayq.CheckTopic(t)
}

// finishBatch: POST /v1/jobs/finish {"jobs":[{"id","reservation"}]} → 200
// {"results":[{"id","ok"} | {"id","error"}]}, in request order, finished in
// one durable write. An entry that fails (stale reservation, unknown or
// malformed id, no reservation) fails alone; only a request that is not
// JSON, too large or over delayq.MaxBatch entries fails whole. An empty
// list answers an empty list.
func (h *handler) finishBatch(w http.ResponseWriter, r *http.Request) {
	var req api.FinishBatchRequest
	if err := decode(w, r, smallRequest, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	refs := make([]delayq.Ref, len(req.Jobs))
	for i, f := range req.Jobs {
		refs[i] = delayq.Ref{ID: f.ID, Reservation: f.Reservation}
	}
	errs, err := h.e.FinishBatch(r.Context(), refs)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := api.FinishBatchResponse{Results: make([]api.FinishResult, len(errs))}
	for i, err := range errs {
		resp.Results[i] = api.FinishResult{ID: req.Jobs[i].ID, OK: err == nil}
		if err != nil {
			e := api.ErrorOf(err)
			resp.Results[i].Error = &e
		}
	}
	writeJSON(w, http.StatusOK, resp)
}
