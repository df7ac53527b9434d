package engine

import "github.com/delayq/delayq/internal/store"

// ttrExpired is how many reservations a timer step ended because their
// TTR ran out. A step makes jobs ready from two sources, delayed jobs
// (each with one Lateness entry) and expired reservations, and buries only
// expired reservations whose attempts are spent (store.Store.Tick), so the
// expiries are the ready jobs without a lateness, plus the buried, plus
// those a topic's backoff delayed.
func ttrExpired(res *store.TickResult) int {
	ready := 0
	for _, n := range res.Ready {
		ready += n
	}
	return max(ready-len(res.Lateness), 0) + res.Buried + res.BackedOff
}
