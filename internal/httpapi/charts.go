package httpapi

import (
	"net/http"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
)

// defaultWithin are the due-count bounds when a request names none: the
// next minute, hour and day.
const defaultWithin = "1m,1h,24h"

// chartRoutes registers what the dashboard's charts read: a topic's due
// counts always, its history when the server keeps one (Options.History).
func (h *handler) chartRoutes() {
	m := h.mux
	m.HandleFunc("GET /v1/topics/{topic}/due", h.dueCounts)
	m.HandleFunc("GET /v1/topics/{topic}/history", h.topicHistory)
}

// dueCounts: GET /v1/topics/{topic}/due?within=1m,1h,24h → how many
// delayed jobs fall due within each bound.
func (h *handler) dueCounts(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	within := r.URL.Query().Get("within")
	if !r.URL.Query().Has("within") {
		within = defaultWithin
	}
	names, bounds, err := parseWithin(within)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	counts, now, err := h.e.DueCounts(r.Context(), topic, bounds)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	resp := api.DueCounts{Topic: topic, At: api.Time{Time: now.UTC()}, Buckets: make([]api.DueBucket, len(bounds))}
	for i, b := range bounds {
		resp.Buckets[i] = api.DueBucket{Within: names[i], Seconds: b.Seconds(), Count: counts[i]}
	}
	writeJSON(w, http.StatusOK, resp)
}

// parseWithin reads a comma-separated list of durations ("1m,1h,1d";
// Go units plus d). The engine checks the values; this checks the shape,
// and stops before parsing a list longer than the engine takes.
func parseWithin(s string) (names []string, bounds []time.Duration, err error) {
	if strings.Count(s, ",") >= engine.MaxDueBounds {
		return nil, nil, delayq.Invalid(engine.CodeBadWithin, "within", "more than %d bounds", engine.MaxDueBounds)
	}
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			return nil, nil, delayq.Invalid(engine.CodeBadWithin, "within", "%q has an empty bound; give durations such as 1m,1h,24h", clipQuery(s))
		}
		d, err := delayq.ParseDuration(part)
		if err != nil {
			return nil, nil, delayq.Invalid(engine.CodeBadWithin, "within", "%q is not a duration such as 90s, 1h or 1d", clipQuery(part))
		}
		names = append(names, part)
		bounds = append(bounds, d)
	}
	return names, bounds, nil
}

// clipQuery shortens user input quoted in an error message.
func clipQuery(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// topicHistory: GET /v1/topics/{topic}/history?range=1h → the topic's
// samples over the range, read from the store (package history): 10 s
// buckets up to a day, one-minute buckets up to a week.
func (h *handler) topicHistory(w http.ResponseWriter, r *http.Request) {
	topic, err := pathTopic(r)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	hist := h.opts.History
	if hist == nil {
		h.writeError(w, r, &httpError{http.StatusNotFound, api.CodeNotFound, "this server keeps no history"})
		return
	}
	var rng time.Duration
	if q := r.URL.Query(); q.Has("range") {
		if rng, err = delayq.ParseDuration(q.Get("range")); err != nil || rng <= 0 {
			h.writeError(w, r, delayq.Invalid(delayq.CodeBadRange, "range", "%q is not a duration such as 1h, 24h or 7d", clipQuery(q.Get("range"))))
			return
		}
	}
	series, err := hist.Read(r.Context(), topic, rng)
	if err != nil {
		h.writeError(w, r, err)
		return
	}
	cfg := hist.Config()
	resp := api.TopicHistory{
		Topic: topic, Interval: series.Step.Seconds(), Span: series.Range.Seconds(),
		Sampled: series.Sampled, MaxTopics: cfg.MaxTopics, SampledTopics: hist.Sampled(),
		Samples: make([]api.HistorySample, len(series.Samples)),
	}
	for _, res := range history.Resolutions() {
		resp.Resolutions = append(resp.Resolutions, api.HistoryResolution{Step: res.Step.Seconds(), Keep: res.Keep.Seconds()})
	}
	per := func(n int, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	for i, s := range series.Samples {
		out := api.HistorySample{
			At: api.Time{Time: s.At.UTC()}, Ready: s.Ready, Delayed: s.Delayed, Reserved: s.Reserved, Buried: s.Buried,
			Fires: s.Fires, FiresPerSec: s.FiresPerSecond(),
			Finishes: s.Finishes, FinishesPerSec: per(s.Finishes, s.Elapsed),
			Failures: s.Failures, FailuresPerSec: per(s.Failures, s.Elapsed),
		}
		if s.Fires > 0 {
			out.Lateness = &api.HistoryLateness{
				P50: s.Lateness.P50.Seconds(), P90: s.Lateness.P90.Seconds(),
				P99: s.Lateness.P99.Seconds(), Max: s.Lateness.Max.Seconds(),
			}
		}
		resp.Samples[i] = out
	}
	writeJSON(w, http.StatusOK, resp)
}
