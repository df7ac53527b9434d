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
	admin        *prometheus.CounterVec
	jobsPut      *prometheus.CounterVec
	jobsFinished *prometheus.CounterVec
	jobsFailed   *prometheus.CounterVec
	httpDuration *prometheus.HistogramVec
	grpcDuration *prometheus.HistogramVec
	topics       topicSet // per-topic label values and counters (topics.go)
	fireLateness prometheus.Histogram
	readyWait    prometheus.Histogram
	timeouts     *prometheus.CounterVec
	releases     *prometheus.CounterVec
	buries       *prometheus.CounterVec
	buried       prometheus.Counter
	waiters      prometheus.Gauge
	commit       prometheus.Histogram

	counts counts // totals as plain numbers (counts.go)
}

// lateBuckets spans 100 µs to 10 s: the interesting part of firing
// lateness is the low milliseconds, the tail shows overload.
var lateBuckets = prometheus.ExponentialBucketsRange(0.0001, 10, 16)

// commitBuckets span 50 µs (a Redis round trip on the same host, an fsync
// on a battery-backed cache) to 2.5 s (a stalled disk).
var commitBuckets = prometheus.ExponentialBucketsRange(0.00005, 2.5, 16)

// httpBuckets span 1 ms to 5 min: a reserve long-polls up to --max-wait.
var httpBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// New creates the collectors on a fresh registry, with Go and process
// collectors. topics, when not nil, is called at scrape time to export
// per-topic job counts.
func New(topics func(context.Context) ([]delayq.TopicStats, error)) *Metrics {
	reg := prometheus.NewRegistry()
	m := &Metrics{
		Registry: reg,
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_operations_total",
			Help: "Jobs handled by each job operation (put, reserve, finish, delete, release, touch, bury, kick, update, purge), by outcome (ok or the error code). Counts jobs, not calls: a batch put of 10, a reserve that hands out 10 and a batch finish of 10 each count 10; a refused call counts 1 under its error code; a reserve that finds nothing counts 0.",
		}, []string{"op", "result"}),
		admin: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_admin_operations_total",
			Help: "Calls that act on no job (pause, resume, policy, backup), by outcome (ok or the error code). Counts calls: these are the only ones.",
		}, []string{"op", "result"}),
		jobsPut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_jobs_put_total",
			Help: "Jobs stored by put, by topic (a batch of 10 counts 10).",
		}, []string{"topic"}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_jobs_finished_total",
			Help: "Jobs their consumer finished (deleted with its reservation), by topic (a batch finish counts each job finished).",
		}, []string{"topic"}),
		jobsFailed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_jobs_failed_total",
			Help: "Jobs that failed, that is became buried (docs/states.md), by topic and reason_class: buried (its consumer buried it), attempts_exhausted (its last allowed attempt ended in a release or a TTR expiry: max_attempts spent). A job counts each time it fails (again after a retry); a release or TTR expiry that leaves attempts is a retry, counted by delayq_releases_total and delayq_ttr_expired_total, not here.",
		}, []string{"topic", "reason_class"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "delayq_http_request_duration_seconds",
			Help:    "HTTP requests by route pattern (\"unmatched\" when none serves the path), method (\"other\" beyond the usual ones) and status code: how long each took to answer. A long-polling reserve counts its wait.",
			Buckets: httpBuckets,
		}, []string{"route", "method", "code"}),
		grpcDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "delayq_grpc_request_duration_seconds",
			Help:    "gRPC, gRPC-Web and Connect calls of delayq.v1.DelayQService by procedure (\"unmatched\" when none serves the path) and status code (\"ok\", \"not_found\", ...): how long each took to answer. A long-polling Reserve counts its wait.",
			Buckets: httpBuckets,
		}, []string{"procedure", "code"}),
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
		timeouts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_ttr_expired_total",
			Help: "Reservations whose TTR ran out (the job was handed out again or buried), by topic.",
		}, []string{"topic"}),
		releases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_releases_total",
			Help: "Jobs a consumer released (handed back to be retried), by topic.",
		}, []string{"topic"}),
		buries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "delayq_buries_total",
			Help: "Jobs a consumer buried (dead-lettered until kicked), by topic.",
		}, []string{"topic"}),
		commit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "delayq_store_commit_seconds",
			Help:    "Duration of the store's durable writes: a group commit to its fsync (disk), a write round trip (Redis).",
			Buckets: commitBuckets,
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
	m.topics.init(DefaultTopicLabels, m.jobsPut, m.jobsFinished, m.jobsFailed, m.timeouts, m.releases, m.buries)
	reg.MustRegister(m.admin, m.jobsPut, m.jobsFinished, m.jobsFailed, m.httpDuration, m.grpcDuration)
	reg.MustRegister(m.ops, m.fireLateness, m.readyWait, m.timeouts, m.releases, m.buries, m.buried, m.waiters, m.commit, buildInfo(buildinfo.Read()),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if topics != nil {
		reg.MustRegister(&topicCollector{topics: topics, set: &m.topics})
	}
	return m
}

// buildInfo is the delayq_build_info gauge, always 1: its labels say which
// build an instance runs, so a dashboard can show a fleet mid-upgrade and
// a query can join on the version.
func buildInfo(i buildinfo.Info) prometheus.Collector {
	g := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "delayq_build_info",
		Help: "Always 1; the labels name the build: release version (the VERSION file), VCS revision, Go version.",
	}, []string{"version", "revision", "goversion"})
	g.WithLabelValues(i.Version, i.Revision, i.GoVersion).Set(1)
	return g
}

// Op counts n jobs of a job operation with their outcome code ("ok" on
// success); see delayq_operations_total's help for what counts.
func (m *Metrics) Op(op, result string, n int) {
	if n > 0 {
		m.ops.WithLabelValues(op, result).Add(float64(n))
	}
}

// Admin counts one call that acts on no job (pause, resume, policy,
// backup) with its outcome code.
func (m *Metrics) Admin(op, result string) { m.admin.WithLabelValues(op, result).Inc() }

// Failure reason classes of delayq_jobs_failed_total: a bounded set, one
// per way a job fails (becomes buried).
const (
	FailBuried            = "buried"             // a consumer buried it
	FailAttemptsExhausted = "attempts_exhausted" // the server buried it: its max_attempts were spent
)

// JobsPut counts n jobs of topic stored by a put.
func (m *Metrics) JobsPut(topic string, n int) {
	if n > 0 {
		m.topics.count(topic, m.jobsPut, "", n, nil)
	}
}

// JobsFinished counts n jobs of topic their consumer finished.
func (m *Metrics) JobsFinished(topic string, n int) {
	if n > 0 {
		m.counts.finishes.Add(uint64(n))
		m.topics.count(topic, m.jobsFinished, "", n, func(c *TopicCounts) { c.Finishes += uint64(n) })
	}
}

// JobsFailed counts n jobs of topic that failed (became buried), of one
// reason class (FailBuried, FailAttemptsExhausted).
func (m *Metrics) JobsFailed(topic, class string, n int) {
	if n > 0 {
		m.topics.count(topic, m.jobsFailed, class, n, nil)
	}
}

// HTTPRequest records one HTTP request. route, method and code must come
// from bounded sets (the caller maps the rest to fixed values).
func (m *Metrics) HTTPRequest(route, method, code string, d time.Duration) {
	m.httpDuration.WithLabelValues(route, method, code).Observe(d.Seconds())
}

// GRPCRequest records one call of the gRPC API. procedure and code must
// come from bounded sets (the service's procedures, the status codes).
func (m *Metrics) GRPCRequest(procedure, code string, d time.Duration) {
	m.grpcDuration.WithLabelValues(procedure, code).Observe(d.Seconds())
}

// LimitTopicLabels bounds the topics with their own topic label value to
// n (the server passes --metrics-max-topics); the others count under
// OtherTopic (0: every topic; below 0 changes nothing). Topics named
// already keep their name.
func (m *Metrics) LimitTopicLabels(n int) {
	if n >= 0 {
		m.topics.setMax(n)
	}
}

// FireLateness records how late a delayed job became ready.
func (m *Metrics) FireLateness(d time.Duration) { m.fireLateness.Observe(d.Seconds()) }

// ReadyWait records how long after its due time a job was reserved.
func (m *Metrics) ReadyWait(d time.Duration) { m.readyWait.Observe(d.Seconds()) }

// Timeouts counts n TTR expiries of topic.
func (m *Metrics) Timeouts(topic string, n int) {
	if n <= 0 {
		return
	}
	m.counts.timeouts.Add(uint64(n))
	m.topics.count(topic, m.timeouts, "", n, func(c *TopicCounts) { c.Timeouts += uint64(n) })
}

// Release counts one job of topic a consumer released.
func (m *Metrics) Release(topic string) {
	m.counts.releases.Add(1)
	m.topics.count(topic, m.releases, "", 1, func(c *TopicCounts) { c.Releases++ })
}

// Bury counts one job of topic a consumer buried.
func (m *Metrics) Bury(topic string) {
	m.counts.buries.Add(1)
	m.topics.count(topic, m.buries, "", 1, func(c *TopicCounts) { c.Buries++ })
}

// Commit records one durable store write (store.CommitObserver).
func (m *Metrics) Commit(d time.Duration) { m.commit.Observe(d.Seconds()) }

// Exhausted counts jobs buried for spent attempts.
func (m *Metrics) Exhausted(n int) { m.buried.Add(float64(n)) }

// Waiters moves the long-poll gauge by delta.
func (m *Metrics) Waiters(delta int) { m.waiters.Add(float64(delta)) }

var (
	jobsDesc = prometheus.NewDesc("delayq_jobs",
		"Live jobs by topic and state; topics without their own label value (--metrics-max-topics) are summed under topic=\"_other\".", []string{"topic", "state"}, nil)
	oldestAgeDesc = prometheus.NewDesc("delayq_oldest_ready_age_seconds",
		"Age of the topic's oldest ready job (how long it has waited for a consumer); 0 when none is ready. Under topic=\"_other\": the oldest of the topics without their own label value.", []string{"topic"}, nil)
)

// topicCollector asks the store for counts at scrape time, so the counts
// are the store's truth, also across instances sharing a store. Topics
// take their label value from set: a topic without its own is summed
// under OtherTopic (its oldest ready age: the largest).
type topicCollector struct {
	topics func(context.Context) ([]delayq.TopicStats, error)
	set    *topicSet
}

func (c *topicCollector) Describe(ch chan<- *prometheus.Desc) { ch <- jobsDesc; ch <- oldestAgeDesc }

// topicFigures are the exported figures of one label value.
type topicFigures struct {
	jobs [4]int // delayed, ready, reserved, buried
	age  time.Duration
}

var jobStates = [4]delayq.State{delayq.StateDelayed, delayq.StateReady, delayq.StateReserved, delayq.StateBuried}

func (c *topicCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ts, err := c.topics(ctx)
	if err != nil {
		return
	}
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	labels := c.set.labels(names)
	now := time.Now()
	by := make(map[string]*topicFigures)
	order := make([]string, 0)
	for i, t := range ts {
		f := by[labels[i]]
		if f == nil {
			f = &topicFigures{}
			by[labels[i]] = f
			order = append(order, labels[i])
		}
		for j, n := range [4]int{t.Delayed, t.Ready, t.Reserved, t.Buried} {
			f.jobs[j] += n
		}
		f.age = max(f.age, OldestReadyAge(t, now))
	}
	for _, l := range order {
		f := by[l]
		for j, state := range jobStates {
			ch <- prometheus.MustNewConstMetric(jobsDesc, prometheus.GaugeValue, float64(f.jobs[j]), l, string(state))
		}
		ch <- prometheus.MustNewConstMetric(oldestAgeDesc, prometheus.GaugeValue, f.age.Seconds(), l)
	}
}

// OldestReadyAge is how long t's oldest ready job has waited at now; 0
// when none is ready. The API's TopicStats and the alarms use it too.
func OldestReadyAge(t delayq.TopicStats, now time.Time) time.Duration {
	if t.Ready == 0 || t.OldestReady.IsZero() {
		return 0
	}
	return max(now.Sub(t.OldestReady), 0)
}
