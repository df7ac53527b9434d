package metrics

import "sync"

// DefaultTopicLabels is how many distinct topics the per-topic counters
// name when the server sets no --max-topics.
const DefaultTopicLabels = 10_000

// OtherTopic is the topic label of every topic beyond the bound.
const OtherTopic = "_other"

// topicLabels bounds the topic label of the per-topic counters. Live
// topics are bounded by --max-topics, but a counter keeps its series after
// its topic empties, so topics that come and go (one per customer, per
// day) would grow the series without end: the first max distinct topics
// this process counts keep their name, later ones count under OtherTopic
// (a topic really named "_other" shares that series; operations.md says
// so). A restart starts over.
type topicLabels struct {
	mu   sync.Mutex
	max  int
	seen map[string]struct{} // guarded by mu
}

func (t *topicLabels) init(max int) {
	t.max = max
	t.seen = make(map[string]struct{})
}

func (t *topicLabels) setMax(n int) {
	t.mu.Lock()
	t.max = n
	t.mu.Unlock()
}

// label is topic's label value: topic itself, or OtherTopic once max
// other topics have been named.
func (t *topicLabels) label(topic string) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.seen[topic]; ok {
		return topic
	}
	if len(t.seen) >= t.max {
		return OtherTopic
	}
	t.seen[topic] = struct{}{}
	return topic
}
