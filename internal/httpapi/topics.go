package httpapi

import (
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
)

// getTopics: GET /v1/topics → {"topics":[...]}.
func (h *handler) getTopics(w http.ResponseWriter, r *http.Request) {
	all, err := h.e.Topics(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	now := time.Now()
	resp := api.TopicsResponse{Topics: make([]api.Topic, 0, len(all))}
	for _, t := range all {
		resp.Topics = append(resp.Topics, toTopic(t, now))
	}
	writeJSON(w, http.StatusOK, resp)
}

// getTopic: GET /v1/topics/{topic}; a topic without jobs has zero counts.
func (h *handler) getTopic(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	t, err := h.e.Topic(r.Context(), topic)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTopic(t, time.Now()))
}

// listJobs: GET /v1/topics/{topic}/jobs?state=&cursor=&limit=.
func (h *handler) listJobs(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	q := r.URL.Query()
	p := engine.ListRequest{Topic: topic, State: delayq.State(q.Get("state")), Cursor: q.Get("cursor")}
	if s := q.Get("limit"); s != "" {
		if p.Limit, err = strconv.Atoi(s); err != nil {
			h.writeError(w, r, delayq.Invalid(delayq.CodeBadLimit, "limit", "%q is not a whole number", s))
			return
		}
	}
	h.streamJobs(w, r, p) // budget.go
}

// kickTopic: POST /v1/topics/{topic}/kick {"n","state"} → {"kicked","state"}.
// Without a state it retries buried jobs only: an operator's kick must
// not fire jobs due later; "delayed" fires those early, explicitly.
func (h *handler) kickTopic(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req api.KickRequest
	if err := decode(w, r, smallRequest, &req); err != nil {
		h.writeError(w, r, err)
		return
	}
	res, err := h.e.Kick(r.Context(), topic, req.N, kickState(req.State))
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	noteAudit(r, slog.Int("kicked", res.Kicked), slog.String("state", string(res.State)))
	writeJSON(w, http.StatusOK, api.KickResponse{Kicked: res.Kicked, State: string(res.State)})
}

// cluster: GET /v1/cluster → {"instances":[...]}.
func (h *handler) cluster(w http.ResponseWriter, r *http.Request) {
	resp := api.ClusterResponse{Instances: []api.Instance{}}
	if h.opts.Cluster == nil {
		u := h.opts.AdvertiseURL
		if u == "" {
			u = "http://" + r.Host
		}
		resp.Instances = append(resp.Instances, api.Instance{URL: u})
		writeJSON(w, http.StatusOK, resp)
		return
	}
	instances, err := h.opts.Cluster(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	for _, in := range instances {
		resp.Instances = append(resp.Instances, api.FromInstance(in))
	}
	writeJSON(w, http.StatusOK, resp)
}

// healthz: GET /healthz → 200 {"status":"ok"}; 503 draining while the
// server shuts down, so load balancers stop sending work.
// healthz answers whether the process is alive: 200 "ok", or 200
// "degraded" with the reason while it serves with limits (a disk below its
// free-space floor takes no new jobs); 503 while draining.
func (h *handler) healthz(w http.ResponseWriter, r *http.Request) {
	if h.e.Draining() {
		h.writeError(w, r, delayq.ErrDraining)
		return
	}
	if reason := h.e.Health(); reason != "" {
		writeJSON(w, http.StatusOK, map[string]string{"status": "degraded", "reason": strings.TrimPrefix(reason, "delayq: ")})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers whether a load balancer should send new work here: 503
// while draining or degraded, with the reason, else 200.
func (h *handler) readyz(w http.ResponseWriter, r *http.Request) {
	if h.e.Draining() {
		h.writeError(w, r, delayq.ErrDraining)
		return
	}
	if reason := h.e.Health(); reason != "" {
		writeJSON(w, http.StatusServiceUnavailable, map[string]string{"status": "degraded", "reason": strings.TrimPrefix(reason, "delayq: ")})
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

func itoa(i int) string { return strconv.Itoa(i) }

// kickState is the state a kick of the v1 API moves: what it names, else
// buried ("" would be beanstalkd's rule, which fires delayed jobs when
// nothing is buried).
func kickState(s string) delayq.State {
	if s == "" {
		return delayq.StateBuried
	}
	return delayq.State(s)
}
