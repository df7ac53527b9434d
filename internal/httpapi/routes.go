package httpapi

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// routes registers every endpoint. Topic names may contain '/', so clients
// percent-encode them; the mux matches escaped segments and PathValue
// decodes them.
func (h *handler) routes() {
	m := h.mux
	m.HandleFunc("POST /v1/topics/{topic}/jobs", h.putJob)
	m.HandleFunc("POST /v1/topics/{topic}/jobs/batch", h.putBatch)
	m.HandleFunc("GET /v1/topics/{topic}/jobs", h.listJobs)
	m.HandleFunc("POST /v1/topics/{topic}/kick", h.kickTopic)
	m.HandleFunc("GET /v1/topics/{topic}", h.getTopic)
	m.HandleFunc("GET /v1/topics", h.getTopics)

	m.HandleFunc("POST /v1/reserve", h.reserve)

	m.HandleFunc("POST /v1/jobs/finish", h.finishBatch)
	m.HandleFunc("GET /v1/jobs/{id}", h.getJob)
	m.HandleFunc("PATCH /v1/jobs/{id}", h.updateJob)
	m.HandleFunc("DELETE /v1/jobs/{id}", h.deleteJob)
	m.HandleFunc("POST /v1/jobs/{id}/finish", h.finishJob)
	m.HandleFunc("POST /v1/jobs/{id}/release", h.releaseJob)
	m.HandleFunc("POST /v1/jobs/{id}/touch", h.touchJob)
	m.HandleFunc("POST /v1/jobs/{id}/bury", h.buryJob)
	m.HandleFunc("POST /v1/jobs/{id}/kick", h.kickJob)

	m.HandleFunc("GET /v1/backup", h.backup)
	h.scheduleRoutes()
	h.alarmRoutes()
	h.pauseRoutes()
	h.policyRoutes()
	h.chartRoutes()
	h.sessionRoutes()

	m.HandleFunc("GET /v1/cluster", h.cluster)
	m.HandleFunc("GET /v1/openapi.json", h.openapi)
	m.HandleFunc("GET /healthz", h.healthz)
	m.HandleFunc("GET /readyz", h.readyz)
	m.Handle("GET /metrics", promhttp.HandlerFor(h.e.Metrics().Registry, promhttp.HandlerOpts{}))

	// The original protocol lives on POST / only; GET / leads to the
	// dashboard when there is one.
	m.HandleFunc("POST /{$}", h.command)
	m.HandleFunc("POST /v1/command", h.command)
	if h.opts.UI != nil {
		m.Handle("/ui/", h.opts.UI)
		m.Handle("GET /{$}", http.RedirectHandler("/ui/", http.StatusFound))
	} else {
		m.HandleFunc("GET /{$}", h.notFound)
	}
}
