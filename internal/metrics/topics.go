package metrics

import (
	"maps"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// DefaultTopicLabels is how many topics have their own topic label value
// when the server sets no --metrics-max-topics.
const DefaultTopicLabels = 100

// OtherTopic is the topic label value of every topic without its own.
const OtherTopic = "_other"

// topicSet is the per-topic state of the metrics: which topics have
// their own label value, and each topic's counters as plain numbers
// (TopicCounts). It lives as long as the topics do: Forget drops a topic
// once it has neither jobs, pause, policy nor waiter and has counted
// nothing for a while, so topics that come and go (one per customer, per
// day) cost nothing once gone, where they used to stay until the process
// ended.
//
// Labels are bounded because every label value is a series per metric in
// every scrape, kept by Prometheus for its retention: the first max topics
// this instance sees (by a count, or by a scrape of the job counts) get
// their own label value and keep it while they are remembered; every other
// topic counts under OtherTopic. When a named topic is forgotten its series
// end (deleted from every vector) and the next new topic takes the freed
// name. A topic really named "_other" never gets a name of its own: it
// shares OtherTopic's series.
type topicSet struct {
	mu     sync.Mutex
	max    int                    // guarded by mu: most topics with their own label value
	named  int                    // guarded by mu: entries with their own label value
	gen    uint64                 // guarded by mu: the last TopicCounts.Gen handed out
	byName map[string]*topicEntry // guarded by mu
	peak   int                    // guarded by mu: the most entries byName held since it was made
	vecs   []*prometheus.CounterVec
}

// topicEntry is one remembered topic.
type topicEntry struct {
	counts  TopicCounts
	named   bool      // has its own label value
	counted time.Time // its last count; zero when only a scrape saw it
}

func (s *topicSet) init(max int, vecs ...*prometheus.CounterVec) {
	s.max = max
	s.byName = make(map[string]*topicEntry)
	s.vecs = vecs
}

func (s *topicSet) setMax(n int) {
	s.mu.Lock()
	s.max = n
	s.mu.Unlock()
}

// entry returns topic's entry, making it (with its own label value while
// there is room) if needed. Requires mu.
func (s *topicSet) entry(topic string) *topicEntry {
	e := s.byName[topic]
	if e == nil {
		s.gen++
		e = &topicEntry{counts: TopicCounts{Gen: s.gen}}
		if topic != OtherTopic && s.named < s.max {
			e.named = true
			s.named++
		}
		s.byName[topic] = e
		s.peak = max(s.peak, len(s.byName))
	}
	return e
}

func (e *topicEntry) label(topic string) string {
	if e.named {
		return topic
	}
	return OtherTopic
}

// count marks topic counted now, runs f on its counters (f may be nil),
// and adds n to vec's series of its label value (class, when not empty,
// is the reason_class label). The series is added under mu, so Forget
// cannot delete it between the choice of the label and the addition and
// leave a series no entry accounts for.
func (s *topicSet) count(topic string, vec *prometheus.CounterVec, class string, n int, f func(c *TopicCounts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(topic)
	e.counted = time.Now()
	if f != nil {
		f(&e.counts)
	}
	if class == "" {
		vec.WithLabelValues(e.label(topic)).Add(float64(n))
	} else {
		vec.WithLabelValues(e.label(topic), class).Add(float64(n))
	}
}

// labels returns the label value of each of names (live topics a scrape
// found), remembering the ones not seen before.
func (s *topicSet) labels(names []string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = s.entry(n).label(n)
	}
	return out
}

// forget drops every topic that live does not keep and that has counted
// nothing since before now-hold, ending its series when it had its own
// label value. It returns how many topics are still remembered.
func (s *topicSet) forget(now time.Time, hold time.Duration, live func(topic string) bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, e := range s.byName {
		if now.Sub(e.counted) < hold || live(name) {
			continue
		}
		delete(s.byName, name)
		if e.named {
			s.named--
			for _, v := range s.vecs {
				v.DeletePartialMatch(prometheus.Labels{"topic": name})
			}
		}
	}
	if s.peak > shrinkFrom && len(s.byName) < s.peak/4 {
		s.byName, s.peak = resized(s.byName), len(s.byName)
	}
	return len(s.byName)
}

// shrinkFrom is the size above which forget copies byName into a map of
// its present size once it has shrunk to a quarter of its peak: a Go map
// never gives back the room of deleted entries, so 200,000 topics gone
// would keep their room for good.
const shrinkFrom = 1024

// resized copies m into a map made for its present size (maps.Clone
// keeps the room of the original).
func resized[K comparable, V any](m map[K]V) map[K]V {
	out := make(map[K]V, len(m))
	maps.Copy(out, m)
	return out
}

// Forget drops the per-topic state of every topic that live does not keep
// (the server's live: jobs, a pause, a policy or a waiting reserve) and
// that has counted nothing (put, finish, failure) for at least hold: its
// counters as ByTopic shows them, its label value, and its own series of
// the per-topic counters. hold lets the readers of ByTopic (the chart
// history, the alarms' failures per minute) see a topic's last counts
// before they go. A topic counted again later starts over at zero under a
// new TopicCounts.Gen. live is called with the metrics locked: it must be
// quick and must not call back. Forget returns how many topics are still
// remembered.
func (m *Metrics) Forget(now time.Time, hold time.Duration, live func(topic string) bool) int {
	return m.topics.forget(now, hold, live)
}

// Topics returns how many topics the metrics remember now.
func (m *Metrics) Topics() int {
	m.topics.mu.Lock()
	defer m.topics.mu.Unlock()
	return len(m.topics.byName)
}
