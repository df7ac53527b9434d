package metrics

import "github.com/prometheus/client_golang/prometheus"

// WatchInflight exports the HTTP request-bytes budget
// (--max-inflight-bytes, limits.Bytes), read at scrape time: the bytes
// charged now, the most ever charged at once, and the takes refused
// (answered 503 too_many_bytes_in_flight). Called once per server.
func (m *Metrics) WatchInflight(now, peak, refused func() int64) {
	gauge := func(name, help string, f func() int64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return float64(f()) })
	}
	m.Registry.MustRegister(
		gauge("delayq_http_inflight_bytes", "Request bytes charged to --max-inflight-bytes now: bodies as they arrive, and what batch puts decode them into.", now),
		gauge("delayq_http_inflight_bytes_peak", "The most request bytes ever charged to --max-inflight-bytes at once.", peak),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "delayq_http_inflight_refused_total",
			Help: "Requests refused with 503 too_many_bytes_in_flight: the budget stayed spent for --inflight-wait, or the request was the youngest of a standoff.",
		}, func() float64 { return float64(refused()) }),
	)
}
