// Package metrics names every Prometheus metric delayq exports and owns
// their collectors. Other packages record through the Metrics methods and
// never build metric names themselves.
package metrics

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/buildinfo"
)

// Metrics holds delayq's collectors, registered on Registry.
type Metrics struct {
	Registry *prometheus.Registry

	ops          *prometheus.CounterVec
	fireLateness prometheus.Histogram
	readyWait    prometheus.Histogram
	timeouts     prometheus.Counter
	buried       prometheus.Counter
	waiters      prometheus.Gauge
}

// lateBuckets spans 100 µs to 10 s: the interesting part of firing
// lateness is the low milliseconds, the tail shows overload.
var lateBuckets = prometheus.ExponentialBucketsRange(0.0001, 10, 16)

// New creates the collectors on a fresh registry, with Go and process
// collectors. topics, when not nil, is called at scrape time to export
// per-topic job counts.
func New(topics func(context.Context) ([]delayq.TopicStats, error)) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_operations_total",
			Help: "Engine operations by kind and outcome (ok or the error code).",
		}, []string{"op", "result"}),
		fireLateness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "delayq_fire_lateness_seconds",
			Help:    "How long after its due time a delayed job was made ready.",
			Buckets: lateBuckets,
		}),
		readyWait: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "delayq_reserve_after_due_seconds",
			Help:    "Time from a job's due time to its reservation (lateness as a consumer sees it).",
			Buckets: lateBuckets,
		}),
		timeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delayq_ttr_expired_total",
			Help: "Reservations whose TTR ran out (the job was handed out again or buried).",
		}),
		buried: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "delayq_attempts_exhausted_total",
			Help: "Jobs buried because their max_attempts were spent.",
		}),
		waiters: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "delayq_reserve_waiters",
			Help: "Reserve calls currently long-polling.",
		}),
	}
	reg.MustRegister(m.ops, m.fireLateness, m.readyWait, m.timeouts, m.buried, m.waiters, buildInfo(buildinfo.Read()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if topics != nil {
		reg.MustRegister(&topicCollector{topics: topics})
	}
	return m
}

// buildInfo is the delayq_build_info gauge, always 1: its labels say which
// build an instance runs, so a dashboard can show a fleet mid-upgrade and
// a query can join on the version.
func buildInfo(i buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "delayq_build_info",
		Help: "Always 1; the labels name the build: module version, VCS revision, Go version.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(i.Version, i.Revision, i.GoVersion).Set(1)
	return g
}

// Op counts one operation with its outcome code ("ok" on success).
func (m *Metrics) Op(op, result string) { m.ops.WithLabelValues(op, result).Inc() }

// FireLateness records how late a delayed job became ready.
func (m *Metrics) FireLateness(d time.Duration) { m.fireLateness.Observe(d.Seconds()) }

// ReadyWait records how long after its due time a job was reserved.
func (m *Metrics) ReadyWait(d time.Duration) { m.readyWait.Observe(d.Seconds()) }

// Timeouts counts TTR expiries.
func (m *Metrics) Timeouts(n int) { m.timeouts.Add(float64(n)) }

// Exhausted counts jobs buried for spent attempts.
func (m *Metrics) Exhausted(n int) { m.buried.Add(float64(n)) }

// Waiters moves the long-poll gauge by delta.
func (m *Metrics) Waiters(delta int) { m.waiters.Add(float64(delta)) }

var jobsDesc = prometheus.NewDesc("delayq_jobs", "Live jobs by topic and state.", []string{"topic", "state"}, nil)

// topicCollector asks the store for counts at scrape time, so the counts
// are the store's truth, also across instances sharing a store.
type topicCollector struct {
	topics func(context.Context) ([]delayq.TopicStats, error)
}

func (c *topicCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc }

func (c *topicCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts, err := c.topics(ctx)
	if err != nil {
		return
	}
	for _, t := range ts {
		for state, n := range map[delayq.State]int{
			delayq.StateDelayed: t.Delayed, delayq.StateReady: t.Ready,
			delayq.StateReserved: t.Reserved, delayq.StateBuried: t.Buried,
		} {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(n), t.Name, string(state))
		}
	}
}
