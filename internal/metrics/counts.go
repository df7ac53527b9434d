package metrics

import "sync/atomic"

// counts keeps the consumer-failure and finish totals as plain numbers
// beside the Prometheus vectors: beanstalkd's stats read them without
// gathering a registry, and so report the very counts /metrics exports.
// The per-topic numbers live in the topic set (topics.go), forgotten with
// their topic.
type counts struct {
	timeouts, releases, buries, finishes atomic.Uint64 // over every topic
}

// TopicCounts are one topic's failure and finish counters since this
// instance first counted it (or since it was last forgotten: Gen tells).
type TopicCounts struct {
	Timeouts, Releases, Buries uint64
	// Finishes counts jobs their consumer finished (delayq_jobs_finished_total).
	Finishes uint64
	// Gen identifies this run of the topic's counters. A topic forgotten
	// (Metrics.Forget) and counted again starts over at zero with a new
	// Gen, so a reader that keeps an earlier copy to take differences
	// takes one only when Gen is the same, and counts from zero otherwise.
	Gen uint64
}

// Failures is what alarms count as failed attempts: TTR expiries,
// releases and buries.
func (c TopicCounts) Failures() uint64 { return c.Timeouts + c.Releases + c.Buries }

// TimeoutsTotal is how many TTR expiries this instance's timer has made
// (delayq_ttr_expired_total over all topics), for beanstalkd's stats
// job-timeouts, so both report one count. Over Redis each instance counts
// the expiries of the timer buckets it holds; Prometheus sums them across
// instances.
func (m *Metrics) TimeoutsTotal() uint64 { return m.counts.timeouts.Load() }

// ReleasesTotal is delayq_releases_total over all topics.
func (m *Metrics) ReleasesTotal() uint64 { return m.counts.releases.Load() }

// BuriesTotal is delayq_buries_total over all topics.
func (m *Metrics) BuriesTotal() uint64 { return m.counts.buries.Load() }

// ByTopic returns a copy of the failure and finish counters of every topic
// the metrics remember that has counted a finish or a failure (Forget
// drops the ones long gone).
func (m *Metrics) ByTopic() map[string]TopicCounts {
	m.topics.mu.Lock()
	defer m.topics.mu.Unlock()
	out := make(map[string]TopicCounts)
	for k, e := range m.topics.byName {
		if c := e.counts; c.Finishes > 0 || c.Failures() > 0 {
			out[k] = c
		}
	}
	return out
}
