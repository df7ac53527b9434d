package store

import (
	"context"
	"time"
)

// DueCounter counts a topic's delayed jobs by due time from an index
// ordered by due time, without reading the jobs. Every Store is one
// (Store embeds it: memstore, diskstore, redisstore). The dashboard's
// due-time distribution ("how many jobs fall due in the next minute, hour,
// day") comes from it.
type DueCounter interface {
	// DueCounts returns, for each bound, how many delayed jobs of topic
	// are due at or before now+bound; counts[i] belongs to bounds[i]. A
	// delayed job already due (the timer has not promoted it yet) counts
	// in every bound. Ready, reserved and buried jobs never count. An
	// unknown topic has zero counts. It is a read: it changes nothing.
	DueCounts(ctx context.Context, topic string, now time.Time, bounds []time.Duration) ([]int, error)
}

// CountDue fills counts for one delayed job due at due (Unix ms): each
// bound whose limit nowMS+bound it does not pass counts it. Stores whose
// index yields due times one by one share it.
func CountDue(counts []int, nowMS, due int64, bounds []time.Duration) {
	for i, b := range bounds {
		if due <= nowMS+b.Milliseconds() {
			counts[i]++
		}
	}
}

// AddLateness records one delayed job of topic made ready d after its due
// time, in Lateness and in LatenessByTopic.
func (r *TickResult) AddLateness(topic string, d time.Duration) {
	r.Lateness = append(r.Lateness, d)
	if r.LatenessByTopic == nil {
		r.LatenessByTopic = make(map[string][]time.Duration)
	}
	r.LatenessByTopic[topic] = append(r.LatenessByTopic[topic], d)
}

// AddBuried records one job of topic buried because its TTR ran out on
// its last attempt, in Buried and in BuriedByTopic.
func (r *TickResult) AddBuried(topic string) {
	r.Buried++
	if r.BuriedByTopic == nil {
		r.BuriedByTopic = make(map[string]int)
	}
	r.BuriedByTopic[topic]++
}

// AddBackedOff records one job of topic whose TTR ran out and that its
// topic's backoff delayed, in BackedOff and in BackedOffByTopic.
func (r *TickResult) AddBackedOff(topic string) {
	r.BackedOff++
	if r.BackedOffByTopic == nil {
		r.BackedOffByTopic = make(map[string]int)
	}
	r.BackedOffByTopic[topic]++
}
