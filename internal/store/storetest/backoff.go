package storetest

import (
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// tickBackoff is tick with per-topic backoffs.
func (h *harness) tickBackoff(now time.Time, bs map[string]store.Backoff) *store.TickResult {
	h.t.Helper()
	res, err := h.s.Tick(h.ctx, store.TickParams{Now: now, Backoff: bs})
	if err != nil {
		h.t.Fatalf("Tick(%s, backoff) = %v, want nil error", now, err)
	}
	return res
}

// testTickBackoff pins TickParams.Backoff: a TTR expiry in a topic with a
// backoff goes delayed until the expired deadline plus
// store.BackoffDelay (exact, jitter included: it is a hash of the job's
// id and attempts), other topics' expiries go ready at once, and a job
// whose attempts are spent is buried, not backed off.
func testTickBackoff(t *testing.T, f Factory) {
	bo := store.Backoff{Initial: time.Second, Max: 10 * time.Second, Factor: 2, Jitter: 0.1}
	bs := map[string]store.Backoff{"t": bo}
	h := open(t, f)
	a, b, c := ready("a", "t"), ready("b", "u"), ready("c", "t")
	a.TTR, b.TTR, c.TTR = 2*time.Second, 2*time.Second, 2*time.Second
	c.MaxAttempts = 1
	h.put(a, b, c)
	h.reserveOne(at(100), "t")
	h.reserveOne(at(100), "u")
	h.reserveOne(at(100), "t")

	// a (first attempt): 1s·(1+0.1·jitter) = 1094 ms after its deadline.
	check(t, "Tick(deadline) with a backoff for t", h.tickBackoff(at(2100), bs),
		&store.TickResult{Ready: map[string]int{"u": 1}, Buried: 1, BuriedByTopic: map[string]int{"t": 1},
			BackedOff: 1, BackedOffByTopic: map[string]int{"t": 1}, Next: at(2100 + 1094)})
	want := a.Clone()
	want.State, want.Attempts, want.Timeouts, want.Due = delayq.StateDelayed, 1, 1, at(2100+1094)
	want.LastReason, want.LastFailed = delayq.ReasonTTRExpired, at(2100)
	check(t, "Get(a) after its TTR ran out", h.get(delayq.Ref{ID: "a"}), want)
	check(t, "Reserve(t) during the backoff", h.reserve(at(3193), 1, "t"), []*delayq.Job{})
	check(t, "Tick(backoff end - 1ms)", h.tickBackoff(at(3193), bs), &store.TickResult{Next: at(3194)})
	check(t, "Tick(backoff end)", h.tickBackoff(at(3194), bs), &store.TickResult{Ready: map[string]int{"t": 1},
		Lateness: []time.Duration{0}, LatenessByTopic: map[string][]time.Duration{"t": {0}}})

	// The second attempt backs off longer (2094 ms), from the deadline
	// even when the Tick runs late.
	h.reserveOne(at(3194), "t")
	check(t, "late Tick after the 2nd deadline", h.tickBackoff(at(6000), bs),
		&store.TickResult{Ready: map[string]int{}, BackedOff: 1, BackedOffByTopic: map[string]int{"t": 1}, Next: at(5194 + 2094)})
	want.Attempts, want.Timeouts, want.Due = 2, 2, at(5194+2094)
	want.LastFailed = at(5194)
	check(t, "Get(a) after its 2nd TTR ran out", h.get(delayq.Ref{ID: "a"}), want)

	// Without a backoff for its topic a TTR expiry is ready at once.
	check(t, "Tick() without backoffs", h.tick(at(7288), 0), &store.TickResult{Ready: map[string]int{"t": 1},
		Lateness: []time.Duration{0}, LatenessByTopic: map[string][]time.Duration{"t": {0}}})
	h.reserveOne(at(7288), "t")
	check(t, "Tick(3rd deadline) without backoffs", h.tick(at(9288), 0), &store.TickResult{Ready: map[string]int{"t": 1}})
}
