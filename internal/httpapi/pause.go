package httpapi

import (
	"net/http"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// pauseForever is the pause of a request without "for": until resumed.
// A century, not a special value, so the store's pause end is an ordinary
// time that every backend keeps.
const pauseForever = 100 * 365 * 24 * time.Hour

// pauseRoutes registers the operator's topic controls: pause, resume and
// purge.
func (h *handler) pauseRoutes() {
	m := h.mux
	m.HandleFunc("POST /v1/topics/{topic}/pause", h.pauseTopic)
	m.HandleFunc("POST /v1/topics/{topic}/resume", h.resumeTopic)
	m.HandleFunc("DELETE /v1/topics/{topic}/jobs", h.purgeJobs)
}

// pauseTopic: POST /v1/topics/{topic}/pause {"for"?} → the topic. Reserves
// skip it until the pause ends (beanstalkd pause-tube); puts still work.
func (h *handler) pauseTopic(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	var req api.PauseRequest
	if r.ContentLength != 0 {
		if err := decode(w, r, smallRequest, &req); err != nil {
			h.writeError(w, r, err)
			return
		}
	}
	d := pauseForever
	if req.For != nil {
		d = time.Duration(*req.For)
		if d <= 0 {
			h.writeError(w, r, delayq.Invalid(delayq.CodeBadPause, "for", "%s is not a positive duration (resume with POST /v1/topics/{topic}/resume)", d))
			return
		}
		d = min(d, pauseForever)
	}
	if err := h.e.Pause(r.Context(), topic, d); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.getTopic(w, r)
}

// resumeTopic: POST /v1/topics/{topic}/resume → the topic, reservable at once.
func (h *handler) resumeTopic(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	if err := h.e.Resume(r.Context(), topic); err != nil {
		h.writeError(w, r, err)
		return
	}
	h.getTopic(w, r)
}
