package storetest

import (
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// dueCounts calls the store's DueCounts; every backend implements it.
func (h *harness) dueCounts(topic string, now time.Time, bounds ...time.Duration) []int {
	h.t.Helper()
	counts, err := h.s.DueCounts(h.ctx, topic, now, bounds)
	if err != nil {
		h.t.Fatalf("DueCounts(%s, %s, %v) = %v, want nil error", topic, now, bounds, err)
	}
	return counts
}

// testDueCounts pins store.DueCounter: a topic's delayed jobs counted by
// due time, bounds inclusive, other states and topics left out, and the
// counts following every transition that moves a due time.
func testDueCounts(t *testing.T, f Factory) {
	const ms = time.Millisecond
	t.Run("EmptyAndUnknown", func(t *testing.T) {
		h := open(t, f)
		check(t, "DueCounts(unknown topic)", h.dueCounts("nope", base, time.Minute, time.Hour), []int{0, 0})
		check(t, "DueCounts(no bounds)", h.dueCounts("nope", base), []int{})
	})
	t.Run("BoundsAreInclusive", func(t *testing.T) {
		h := open(t, f)
		// Due at +1s, +60s, +60.001s, +1h and +2 days from base.
		h.put(delayed("a", "t", 1000), delayed("b", "t", 60_000), delayed("c", "t", 60_001),
			delayed("d", "t", 3_600_000), delayed("e", "t", 2*86_400_000))
		check(t, "DueCounts(t, 1m, 1h, 24h)", h.dueCounts("t", base, time.Minute, time.Hour, 24*time.Hour), []int{2, 4, 4})
		check(t, "DueCounts(t, 60.001s, 48h, 48h-1ms)", h.dueCounts("t", base, 60_001*ms, 48*time.Hour, 48*time.Hour-ms),
			[]int{3, 5, 4})
		// Bounds in any order are each counted on their own.
		check(t, "DueCounts(t, 24h, 1m)", h.dueCounts("t", base, 24*time.Hour, time.Minute), []int{4, 2})
		// A job already due but not yet promoted counts in every bound.
		check(t, "DueCounts(t) 2s later, 1ms and 1m", h.dueCounts("t", at(2000), ms, time.Minute), []int{1, 3})
	})
	t.Run("OnlyDelayedJobsOfTheTopic", func(t *testing.T) {
		h := open(t, f)
		h.put(ready("r", "t"), delayed("d", "t", 5000), delayed("other", "t.x", 5000), delayed("o2", "u", 5000))
		h.put(delayed("b", "t", 1))
		h.put(ready("v", "t"))
		h.tick(at(2), 0) // b becomes ready
		j := h.reserveOne(at(2), "t")
		if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(j), Now: at(2)}); err != nil {
			t.Fatal(err)
		}
		h.reserveOne(at(3), "t") // reserved, deadline within the bound
		if ts := h.topics()[0]; ts.Name != "t" || ts.Delayed != 1 || ts.Ready != 1 || ts.Reserved != 1 || ts.Buried != 1 {
			t.Fatalf("Topics()[0] = %+v, want topic t with one job in each state", ts)
		}
		check(t, "DueCounts(t, 1h)", h.dueCounts("t", at(3), time.Hour), []int{1})
		check(t, "DueCounts(t.x, 1h)", h.dueCounts("t.x", at(3), time.Hour), []int{1})
	})
	t.Run("FollowsTransitions", func(t *testing.T) {
		h := open(t, f)
		h.put(delayed("a", "t", 500), delayed("b", "t", 30_000), delayed("c", "t", 7_200_000))
		bounds := []time.Duration{time.Minute, time.Hour, 24 * time.Hour}
		check(t, "DueCounts(t) after put", h.dueCounts("t", base, bounds...), []int{2, 2, 3})
		h.tick(at(500), 0) // a: delayed -> ready
		check(t, "DueCounts(t) after a fired", h.dueCounts("t", at(500), bounds...), []int{1, 1, 2})
		later := at(100_000)
		if _, err := h.s.Update(h.ctx, store.UpdateParams{Ref: delayq.Ref{ID: "c"}, Due: &later, Now: at(500)}); err != nil {
			t.Fatal(err)
		}
		check(t, "DueCounts(t) after c moved to +100s", h.dueCounts("t", at(500), bounds...), []int{1, 2, 2})
		if _, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "b"}}); err != nil {
			t.Fatal(err)
		}
		check(t, "DueCounts(t) after b deleted", h.dueCounts("t", at(500), bounds...), []int{0, 1, 1})
		j := h.reserveOne(at(600), "t")
		if _, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(j), Due: at(20_000), Delay: 19_400 * ms, Now: at(600)}); err != nil {
			t.Fatal(err)
		}
		check(t, "DueCounts(t) after a released with a delay", h.dueCounts("t", at(600), bounds...), []int{1, 2, 2})
		if n, err := h.s.Kick(h.ctx, store.KickParams{Topic: "t", Max: 1, Now: at(600)}); err != nil || n != 1 {
			t.Fatalf("Kick(t, 1) = %d, %v; want 1, nil", n, err)
		}
		check(t, "DueCounts(t) after kicking the earliest delayed job", h.dueCounts("t", at(600), bounds...), []int{0, 1, 1})
		if f.Reopen != nil {
			h.reopen()
			check(t, "DueCounts(t) after reopen", h.dueCounts("t", at(600), bounds...), []int{0, 1, 1})
		}
	})
}
