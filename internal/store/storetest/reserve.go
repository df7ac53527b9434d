package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

func testReserve(t *testing.T, f Factory) {
	t.Run("PriorityThenSeqAcrossTopics", func(t *testing.T) {
		h := open(t, f)
		a1, b1, c1, a2, b2 := ready("a1", "a"), ready("b1", "b"), ready("c1", "c"), ready("a2", "a"), ready("b2", "b")
		a1.Priority, b1.Priority, c1.Priority, a2.Priority, b2.Priority = 5, 1, 0, 1, 5
		h.put(a1, b1, c1, a2, b2)
		now := at(1000)
		got := h.reserve(now, 10, "a", "b", "c")
		want := []*delayq.Job{reservedAs(c1, now), reservedAs(b1, now), reservedAs(a2, now), reservedAs(a1, now), reservedAs(b2, now)}
		check(t, "Reserve(a b c, max 10)", got, want)
		for _, w := range want {
			check(t, "Get("+w.ID+")", h.get(delayq.Ref{ID: w.ID}), w)
		}
	})
	t.Run("Max", func(t *testing.T) {
		h := open(t, f)
		a, b, c := ready("a", "t"), ready("b", "t"), ready("c", "t")
		h.put(a, b, c)
		check(t, "Reserve(t, max 2)", h.reserve(base, 2, "t"), []*delayq.Job{reservedAs(a, base), reservedAs(b, base)})
		check(t, "Reserve(t, max 2) again", h.reserve(base, 2, "t"), []*delayq.Job{reservedAs(c, base)})
	})
	t.Run("OnlyListedTopics", func(t *testing.T) {
		h := open(t, f)
		a, b := ready("a", "a"), ready("b", "b")
		a.Priority = 0
		h.put(a, b)
		check(t, "Reserve(b, x)", h.reserve(base, 10, "b", "x"), []*delayq.Job{reservedAs(b, base)})
		check(t, "Get(a)", h.get(delayq.Ref{ID: "a"}), a)
	})
	t.Run("OnlyReadyJobs", func(t *testing.T) {
		h := open(t, f)
		h.put(delayed("d", "t", 1), ready("r", "t"))
		h.reserveOne(base, "t")
		check(t, "Reserve(t) with only delayed and reserved jobs", h.reserve(base, 10, "t"), []*delayq.Job{})
	})
	t.Run("NothingReady", func(t *testing.T) {
		h := open(t, f)
		check(t, "Reserve(t) of an empty store", h.reserve(base, 10, "t"), []*delayq.Job{})
	})
	t.Run("SkipsPausedTopic", func(t *testing.T) {
		h := open(t, f)
		a, b := ready("a", "a"), ready("b", "b")
		a.Priority = 0
		h.put(a, b)
		h.pause("a", at(5000))
		check(t, "Reserve(a b) at pause-1ms", h.reserve(at(4999), 1, "a", "b"), []*delayq.Job{reservedAs(b, at(4999))})
		check(t, "Reserve(a) at pause-1ms", h.reserve(at(4999), 1, "a"), []*delayq.Job{})
		check(t, "Reserve(a) at pause end", h.reserve(at(5000), 1, "a"), []*delayq.Job{reservedAs(a, at(5000))})
	})
	t.Run("Unpause", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "a")
		h.put(a)
		h.pause("a", at(5000))
		h.pause("a", time.Time{})
		check(t, "Reserve(a) after unpause", h.reserve(base, 1, "a"), []*delayq.Job{reservedAs(a, base)})
	})
	t.Run("SetsReservationEachAttempt", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t")
		a.TTR = 1500 * time.Millisecond
		h.put(a)
		first := h.reserveOne(base, "t")
		check(t, "Reserve(t) first", first, reservedAs(a, base))
		h.tick(first.Deadline, 0)
		afterExpiry := h.get(delayq.Ref{ID: "a"})
		now := at(7000)
		second := h.reserveOne(now, "t")
		check(t, "Reserve(t) second", second, reservedAs(afterExpiry, now))
		if second.Attempts != 2 || second.Reservation != delayq.ReservationToken(a.Seq, 2) {
			t.Errorf("Reserve(t) second = attempts %d reservation %q, want 2, %q",
				second.Attempts, second.Reservation, delayq.ReservationToken(a.Seq, 2))
		}
	})
	t.Run("ConcurrentReservesHandOutEachJobOnce", func(t *testing.T) { testConcurrentReserve(t, f) })
}

// testConcurrentReserve races reservers and checks that no job is handed
// out twice and none is lost.
func testConcurrentReserve(t *testing.T, f Factory) {
	h := open(t, f)
	const n, workers = 120, 6
	jobs := make([]*delayq.Job, n)
	for i := range jobs {
		jobs[i] = ready(fmt.Sprintf("j%d", i), fmt.Sprintf("t%d", i%3))
	}
	h.put(jobs...)
	var mu sync.Mutex
	got := map[uint64]int{}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for range n {
				res, err := h.s.Reserve(h.ctx, store.ReserveParams{Topics: []string{"t0", "t1", "t2"}, Max: 1 + w%3, Now: base})
				if err != nil {
					t.Errorf("Reserve() = %v", err)
					return
				}
				if len(res) == 0 {
					return
				}
				mu.Lock()
				for _, j := range res {
					got[j.Seq]++
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, j := range jobs {
		if got[j.Seq] != 1 {
			t.Errorf("job %s reserved %d times, want 1", j.ID, got[j.Seq])
		}
	}
}

func testTick(t *testing.T, f Factory) {
	t.Run("DelayedReadyAtDueNotBefore", func(t *testing.T) {
		h := open(t, f)
		d := delayed("d", "t", 5000)
		h.put(d)
		check(t, "Tick(due-1ms)", h.tick(at(4999), 0), &store.TickResult{Next: at(5000)})
		check(t, "Get(d) after Tick(due-1ms)", h.get(delayq.Ref{ID: "d"}), d)
		check(t, "Reserve(t) at due-1ms", h.reserve(at(4999), 1, "t"), []*delayq.Job{})
		check(t, "Tick(due)", h.tick(at(5000), 0), &store.TickResult{Ready: map[string]int{"t": 1}, Lateness: []time.Duration{0},
			LatenessByTopic: map[string][]time.Duration{"t": {0}}})
		want := d.Clone()
		want.State = delayq.StateReady
		check(t, "Get(d) after Tick(due)", h.get(delayq.Ref{ID: "d"}), want)
	})
	t.Run("LatenessAndReadyPerTopic", func(t *testing.T) {
		h := open(t, f)
		h.put(delayed("a", "x", 100), delayed("b", "y", 200), delayed("c", "x", 300), delayed("later", "x", 10_000))
		got := h.tick(at(1000), 0)
		want := &store.TickResult{
			Ready:    map[string]int{"x": 2, "y": 1},
			Lateness: []time.Duration{900 * time.Millisecond, 800 * time.Millisecond, 700 * time.Millisecond},
			LatenessByTopic: map[string][]time.Duration{
				"x": {900 * time.Millisecond, 700 * time.Millisecond},
				"y": {800 * time.Millisecond},
			},
			Next: at(10_000),
		}
		check(t, "Tick(+1s)", got, want)
	})
	t.Run("NothingPending", func(t *testing.T) {
		h := open(t, f)
		check(t, "Tick() of an empty store", h.tick(base, 0), &store.TickResult{})
		h.put(ready("r", "t"), ready("b", "t"))
		j := h.reserveOne(base, "t")
		if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Now: base}); err != nil {
			t.Fatal(err)
		}
		check(t, "Tick() with ready and buried jobs only", h.tick(at(1_000_000), 0), &store.TickResult{})
	})
	t.Run("NextIsEarliestDueOrDeadline", func(t *testing.T) {
		h := open(t, f)
		r := ready("r", "t")
		r.TTR = 3 * time.Second
		h.put(r, delayed("d", "t", 5000), delayed("e", "u", 4000))
		h.reserveOne(base, "t")
		check(t, "Tick() with deadline 3s, dues 4s 5s", h.tick(base, 0), &store.TickResult{Next: at(3000)})
		h.tick(at(3000), 0)
		check(t, "Tick() after the deadline passed", h.tick(at(3000), 0), &store.TickResult{Next: at(4000)})
	})
	t.Run("NowNeverGoesBack", func(t *testing.T) {
		// A reserve whose caller read the clock before a Tick that readied
		// the job must still give the consumer a full TTR from that Tick.
		h := open(t, f)
		d := delayed("d", "t", 10_000)
		d.TTR = time.Minute
		h.put(d)
		h.tick(at(10_000), 0)
		got := h.reserveOne(at(9_000), "t")
		check(t, "Reserve(at 9s) after Tick(at 10s): Deadline", got.Deadline, at(10_000).Add(time.Minute))
	})
	t.Run("ReadyPutAfterReserveReadClock", func(t *testing.T) {
		// A producer's put of a ready job can land between a reserve's
		// clock read and its turn at the store: the reservation still
		// starts no earlier than the job's Due.
		h := open(t, f)
		r := newJob("r", "t", at(10_000), at(10_000))
		r.TTR = time.Minute
		h.put(r)
		got := h.reserveOne(at(9_000), "t")
		check(t, "Reserve(at 9s) of a job ready since 10s: Deadline", got.Deadline, at(10_000).Add(time.Minute))
	})
	t.Run("MaxChunks", func(t *testing.T) { testTickMax(t, f) })
	t.Run("TTRExpiry", func(t *testing.T) {
		h := open(t, f)
		a, b := ready("a", "t"), ready("b", "u")
		a.TTR, b.TTR = 2*time.Second, 2*time.Second
		h.put(a, b)
		j := h.reserveOne(at(100), "t")
		h.reserveOne(at(200), "u")
		check(t, "Tick(deadline-1ms)", h.tick(at(2099), 0), &store.TickResult{Next: at(2100)})
		check(t, "Get(a) before deadline", h.get(delayq.Ref{ID: "a"}), j)
		check(t, "Tick(deadline)", h.tick(at(2100), 0), &store.TickResult{Ready: map[string]int{"t": 1}, Next: at(2200)})
		want := a.Clone()
		want.Attempts, want.Timeouts, want.Due = 1, 1, at(2100)
		want.LastReason, want.LastFailed = delayq.ReasonTTRExpired, at(2100)
		check(t, "Get(a) after TTR expiry", h.get(delayq.Ref{ID: "a"}), want)
		// A late tick still dates the job's return to its deadline.
		check(t, "Tick(deadline+500ms)", h.tick(at(2700), 0), &store.TickResult{Ready: map[string]int{"u": 1}})
		want = b.Clone()
		want.Attempts, want.Timeouts, want.Due = 1, 1, at(2200)
		want.LastReason, want.LastFailed = delayq.ReasonTTRExpired, at(2200)
		check(t, "Get(b) after a late tick", h.get(delayq.Ref{ID: "b"}), want)
	})
	t.Run("TTRExpiryAttemptsSpentBuries", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t")
		a.MaxAttempts = 2
		h.put(a)
		h.reserveOne(base, "t")
		h.tick(at(10_000), 0)
		h.reserveOne(at(10_000), "t")
		check(t, "Tick() at the 2nd deadline", h.tick(at(25_000), 0), &store.TickResult{Buried: 1, BuriedByTopic: map[string]int{"t": 1}})
		want := a.Clone()
		// The last expiry buried the job: it counts as a bury, not a
		// TTR expiry (each attempt once, by its outcome).
		want.State, want.Attempts, want.Timeouts, want.Buries, want.Due = delayq.StateBuried, 2, 1, 1, at(20_000)
		want.LastReason, want.LastFailed = delayq.ReasonTTRExpired, at(20_000)
		check(t, "Get(a) after its last TTR ran out", h.get(delayq.Ref{ID: "a"}), want)
	})
}

// testTickMax checks Tick moves at most Max jobs and reports Next == Now
// while more are due.
func testTickMax(t *testing.T, f Factory) {
	h := open(t, f)
	for i := range 5 {
		h.put(delayed(fmt.Sprintf("d%d", i), "t", int64(100+i)))
	}
	h.put(delayed("later", "t", 9000))
	now := at(1000)
	moved := 0
	for call := 1; call <= 3; call++ {
		res := h.tick(now, 2)
		n := res.Ready["t"]
		wantNext := now
		if call == 3 {
			wantNext = at(9000)
		}
		if n != min(2, 5-moved) || !res.Next.Equal(wantNext) || len(res.Lateness) != n {
			t.Errorf("Tick(max 2) call %d = ready %d, %d latenesses, next %s; want %d, %d, %s",
				call, n, len(res.Lateness), res.Next, min(2, 5-moved), min(2, 5-moved), wantNext)
		}
		moved += n
	}
	// Exactly Max due: Next is the real next time, not Now.
	h.put(delayed("e1", "u", 2000), delayed("e2", "u", 2001))
	check(t, "Tick(max 2) with exactly 2 due", h.tick(at(3000), 2),
		&store.TickResult{Ready: map[string]int{"u": 2}, Lateness: []time.Duration{999 * time.Millisecond, time.Second},
			LatenessByTopic: map[string][]time.Duration{"u": {999 * time.Millisecond, time.Second}}, Next: at(9000)})
}
