package httpapi

import (
	"net/http"
	"slices"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
)

// policyRoutes registers the topic policies' endpoints.
func (h *handler) policyRoutes() {
	m := h.mux
	m.HandleFunc("GET /v1/policies", h.listPolicies)
	m.HandleFunc("PUT /v1/topics/{topic}/policy", h.putPolicy)
	m.HandleFunc("GET /v1/topics/{topic}/policy", h.getPolicy)
	m.HandleFunc("DELETE /v1/topics/{topic}/policy", h.deletePolicy)
}

// parsePolicy is PUT's parser: the strict JSON decode, then the engine's
// checks. Apart so a fuzz target can reach it.
func parsePolicy(body []byte) (engine.Policy, error) {
	var req api.PolicyRequest
	if err := decodeBytes(body, &req); err != nil {
		return engine.Policy{}, err
	}
	return engine.NewPolicy(toPolicySpec(&req))
}

// toPolicySpec translates the wire's policy; the engine judges it.
func toPolicySpec(req *api.PolicyRequest) engine.PolicySpec {
	dur := func(d *api.Duration) *time.Duration {
		if d == nil {
			return nil
		}
		v := time.Duration(*d)
		return &v
	}
	spec := engine.PolicySpec{TTR: dur(req.TTR), MaxAttempts: req.MaxAttempts, MaxJobs: req.MaxJobs}
	if b := req.Backoff; b != nil {
		spec.Backoff = &engine.BackoffSpec{Initial: dur(b.Initial), Max: dur(b.Max), Factor: b.Factor, Jitter: b.Jitter}
	}
	return spec
}

// toPolicy is a topic's policy on the wire.
func toPolicy(topic string, p engine.Policy) api.Policy {
	w := api.Policy{Topic: topic, MaxAttempts: p.MaxAttempts, MaxJobs: p.MaxJobs}
	if p.TTR > 0 {
		d := api.Duration(p.TTR)
		w.TTR = &d
	}
	if b := p.Backoff; b != nil {
		w.Backoff = &api.Backoff{Initial: api.Duration(b.Initial), Max: api.Duration(b.Max), Factor: b.Factor, Jitter: b.Jitter}
	}
	return w
}

// putPolicy: PUT /v1/topics/{topic}/policy → 201 created or 200
// replaced, with the policy. Bad input changes nothing.
func (h *handler) putPolicy(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	body, err := readBody(w, r, smallRequest)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := parsePolicy(body)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	created, err := h.e.SetPolicy(r.Context(), topic, p)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, putStatus(created), toPolicy(topic, p))
}

// getPolicy: GET /v1/topics/{topic}/policy → the policy, or 404.
func (h *handler) getPolicy(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	p, err := h.e.GetPolicy(r.Context(), topic)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toPolicy(topic, p))
}

// deletePolicy: DELETE /v1/topics/{topic}/policy → 204, or 404.
func (h *handler) deletePolicy(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := h.e.DeletePolicy(r.Context(), topic); err != nil {
		h.writeError(w, r, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// listPolicies: GET /v1/policies → {"policies":[...]}, by topic.
func (h *handler) listPolicies(w http.ResponseWriter, r *http.Request) {
	all, err := h.e.Policies(r.Context())
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := api.PoliciesResponse{Policies: make([]api.Policy, 0, len(all))}
	for topic, p := range all {
		resp.Policies = append(resp.Policies, toPolicy(topic, p))
	}
	slices.SortFunc(resp.Policies, func(a, b api.Policy) int {
		if a.Topic < b.Topic {
			return -1
		}
		if a.Topic > b.Topic {
			return 1
		}
		return 0
	})
	writeJSON(w, http.StatusOK, resp)
}
