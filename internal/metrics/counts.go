package metrics

import (
	"sync"
	"sync/atomic"
)

// counts keeps the consumer-failure and finish counters as plain numbers
// beside the Prometheus vectors: beanstalkd's stats, the alarms and the
// chart history read them without gathering a registry, and so report the
// very counts /metrics exports.
type counts struct {
	timeouts, releases, buries, finishes atomic.Uint64 // over every topic

	mu      sync.Mutex
	byTopic map[string]*TopicCounts // guarded by mu
}

// TopicCounts are one topic's failure and finish counters since the
// start.
type TopicCounts struct {
	Timeouts, Releases, Buries uint64
	// Finishes counts jobs their consumer finished (delayq_jobs_finished_total).
	Finishes uint64
}

// Failures is what alarms count as failed attempts: TTR expiries,
// releases and buries.
func (c TopicCounts) Failures() uint64 { return c.Timeouts + c.Releases + c.Buries }

func (c *counts) init() { c.byTopic = make(map[string]*TopicCounts) }

// add counts n of one kind (total is the kind's total counter) for topic.
func (c *counts) add(topic string, total *atomic.Uint64, n int) {
	total.Add(uint64(n))
	c.mu.Lock()
	t := c.byTopic[topic]
	if t == nil {
		t = &TopicCounts{}
		c.byTopic[topic] = t
	}
	switch total {
	case &c.timeouts:
		t.Timeouts += uint64(n)
	case &c.releases:
		t.Releases += uint64(n)
	case &c.buries:
		t.Buries += uint64(n)
	case &c.finishes:
		t.Finishes += uint64(n)
	}
	c.mu.Unlock()
}

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

// ByTopic returns a copy of every topic's failure and finish counters on this
// instance since it started.
func (m *Metrics) ByTopic() map[string]TopicCounts {
	m.counts.mu.Lock()
	defer m.counts.mu.Unlock()
	out := make(map[string]TopicCounts, len(m.counts.byTopic))
	for k, v := range m.counts.byTopic {
		out[k] = *v
	}
	return out
}
