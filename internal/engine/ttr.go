package engine

import "github.com/delayq/delayq/internal/store"

// ttrExpired is how many reservations of each topic a timer step ended
// because their TTR ran out. A step makes jobs ready from two sources,
// delayed jobs (each with one lateness entry) and expired reservations,
// and buries only expired reservations whose attempts are spent
// (store.Store.Tick), so a topic's expiries are its ready jobs without a
// lateness, plus its buried, plus those its backoff delayed.
func ttrExpired(res *store.TickResult) map[string]int {
	var out map[string]int
	add := func(topic string, n int) {
		if n <= 0 {
			return
		}
		if out == nil {
			out = make(map[string]int)
		}
		out[topic] += n
	}
	for topic, n := range res.Ready {
		add(topic, n-len(res.LatenessByTopic[topic]))
	}
	for topic, n := range res.BuriedByTopic {
		add(topic, n)
	}
	for topic, n := range res.BackedOffByTopic {
		add(topic, n)
	}
	return out
}
