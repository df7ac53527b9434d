package httpapi

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/alarm"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/limits"
	"github.com/delayq/delayq/internal/schedule"
)

// Options configure the handler. Zero values take the documented defaults.
type Options struct {
	// Logger receives one line per internal error. Default slog.Default().
	Logger *slog.Logger
	// MaxRequestBytes bounds a batch put's request body; larger requests
	// answer 413 request_too_large. Default: enough for a full batch
	// (delayq.MaxBatch jobs) of base64 bodies at the engine's MaxBody.
	// Other requests are bounded by what one job at MaxBody can need.
	MaxRequestBytes int64
	// Cluster lists the live instances for GET /v1/cluster. Nil means this
	// instance alone, at AdvertiseURL.
	Cluster func(ctx context.Context) ([]delayq.Instance, error)
	// AdvertiseURL is this instance's base URL, e.g. "http://10.0.0.5:7480".
	// Default: http:// plus the Host the request was sent to.
	AdvertiseURL string
	// UI, when set, serves the dashboard under /ui/ (it sees the full
	// path, /ui/ included), and GET / redirects there.
	UI http.Handler
	// Schedules, when set, serves the periodic jobs' endpoints
	// (/v1/schedules, schedules.go).
	Schedules *schedule.Service
	// History, when set, serves the topics' sampled history
	// (/v1/topics/{topic}/history, charts.go); without it that answers
	// 404.
	History *history.History
	// Alarms, when set, serves the alarms' endpoints (/v1/alarms,
	// alarms.go).
	Alarms *alarm.Service
	// Sessions are the dashboard's logins (POST /v1/session, session.go);
	// give Guard the same. Nil: a server without tokens, nothing to log
	// in to.
	Sessions *auth.Sessions
	// Rates bounds logins as any other request of their token (give Guard
	// the same); Failures bounds failed logins per remote address (give
	// Guard the same, which counts unknown tokens in it too). Nil: no
	// bound.
	Rates, Failures *limits.Rates
}

// perJobOverhead is room for a job's JSON fields besides its body.
const perJobOverhead = 4 << 10

// handler serves the HTTP API over one engine.
type handler struct {
	e    *engine.Engine
	opts Options
	log  *slog.Logger
	mux  *http.ServeMux

	// oneJobBytes bounds every request but a batch put: a body at MaxBody
	// written with the longest JSON escapes (\u00XX, 6 bytes per byte).
	oneJobBytes int64
}

// NewHandler returns the HTTP API of e.
func NewHandler(e *engine.Engine, opts Options) http.Handler {
	maxBody := int64(e.Config().MaxBody)
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = DefaultMaxRequestBytes(maxBody)
	}
	h := &handler{e: e, opts: opts, log: opts.Logger, mux: http.NewServeMux(),
		oneJobBytes: 6*maxBody + 16*perJobOverhead}
	h.routes()
	return h
}

// ServeHTTP dispatches to the mux, answering unknown paths and wrong
// methods with JSON errors rather than the mux's plain-text ones.
func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	mh, pattern := h.mux.Handler(r)
	if pattern != "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	// The mux answers 404, 405 (with Allow) or a path-cleaning redirect;
	// run its handler against a probe to learn which.
	p := &probe{header: http.Header{}}
	mh.ServeHTTP(p, r)
	switch p.status {
	case http.StatusNotFound:
		h.notFound(w, r)
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", p.header.Get("Allow"))
		h.writeError(w, r, &httpError{http.StatusMethodNotAllowed, delayq.CodeMethodNotAllowed,
			r.Method + " is not allowed on " + r.URL.Path + " (allowed: " + p.header.Get("Allow") + ")"})
	default:
		h.mux.ServeHTTP(w, r)
	}
}

// notFound answers a path no route serves.
func (h *handler) notFound(w http.ResponseWriter, r *http.Request) {
	h.writeError(w, r, &httpError{http.StatusNotFound, api.CodeNotFound, "no such endpoint: " + r.Method + " " + r.URL.Path})
}

// probe is a ResponseWriter that keeps only the status and headers.
type probe struct {
	header http.Header
	status int
}

func (p *probe) Header() http.Header { return p.header }
func (p *probe) WriteHeader(status int) {
	if p.status == 0 {
		p.status = status
	}
}
func (p *probe) Write(b []byte) (int, error) {
	p.WriteHeader(http.StatusOK)
	return len(b), nil
}
