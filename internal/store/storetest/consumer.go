package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// held returns the ref a consumer holding j presents.
func held(j *delayq.Job) delayq.Ref { return delayq.Ref{ID: j.ID, Reservation: j.Reservation} }

// unreserved returns want (a clone of j) with the reservation cleared.
func unreserved(j *delayq.Job, state delayq.State, due time.Time) *delayq.Job {
	w := j.Clone()
	w.State, w.Due, w.Reservation, w.Deadline = state, due, "", time.Time{}
	return w
}

// putReserved puts a ready job of topic t with id and reserves it at now.
func (h *harness) putReserved(id string, now time.Time, edit func(*delayq.Job)) *delayq.Job {
	h.t.Helper()
	j := ready(id, "t-"+id)
	if edit != nil {
		edit(j)
	}
	h.put(j)
	return h.reserveOne(now, j.Topic)
}

func testRelease(t *testing.T, f Factory) {
	now := at(1000)
	cases := []struct {
		name  string
		edit  func(*delayq.Job)
		p     store.ReleaseParams // Ref filled in
		state delayq.State
		due   time.Time
	}{
		{"NowMakesReady", nil, store.ReleaseParams{Due: now, Now: now}, delayq.StateReady, now},
		{"PastDueMakesReady", nil, store.ReleaseParams{Due: at(500), Now: now}, delayq.StateReady, at(500)},
		{"FutureMakesDelayed", nil, store.ReleaseParams{Due: at(1001), Delay: time.Millisecond, Now: now}, delayq.StateDelayed, at(1001)},
		{"ChangesPriority", nil, store.ReleaseParams{Due: now, Priority: u32(7), Now: now}, delayq.StateReady, now},
		{"AttemptsSpentBuries", func(j *delayq.Job) { j.MaxAttempts = 1 }, store.ReleaseParams{Due: at(9000), Delay: 8 * time.Second, Now: now}, delayq.StateBuried, now},
		{"AttemptsLeftDelays", func(j *delayq.Job) { j.MaxAttempts = 2 }, store.ReleaseParams{Due: at(9000), Delay: 8 * time.Second, Now: now}, delayq.StateDelayed, at(9000)},
		{"KeepsReason", nil, store.ReleaseParams{Due: at(2000), Reason: "upstream 503: try later ✓", Now: now}, delayq.StateDelayed, at(2000)},
		{"ReasonWhenBuried", func(j *delayq.Job) { j.MaxAttempts = 1 }, store.ReleaseParams{Due: now, Reason: "gave up", Now: now}, delayq.StateBuried, now},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := open(t, f)
			j := h.putReserved("a", base, tc.edit)
			tc.p.Ref = held(j)
			got, err := h.s.Release(h.ctx, tc.p)
			checkErr(t, "Release()", err, nil)
			want := unreserved(j, tc.state, tc.due)
			// A job's counters count its attempts by outcome (docs/states.md):
			// a release that buries it counts as a bury, not a release.
			want.Releases, want.Delay = 1, tc.p.Delay
			want.LastReason, want.LastFailed = tc.p.Reason, now
			if tc.p.Priority != nil {
				want.Priority = *tc.p.Priority
			}
			if tc.state == delayq.StateBuried {
				want.Releases, want.Buries = 0, 1
			}
			check(t, "Release()", got, want)
			check(t, "Get(a) after Release", h.get(delayq.Ref{ID: "a"}), want)
		})
	}
	t.Run("ReasonReplacedByTheNextFailure", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		if _, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(j), Due: now, Reason: "first", Now: now}); err != nil {
			t.Fatal(err)
		}
		j2 := h.reserveOne(at(1500), "t-a")
		got, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(j2), Due: at(1500), Now: at(1500)})
		checkErr(t, "second Release()", err, nil)
		if got.LastReason != "" || !got.LastFailed.Equal(at(1500)) {
			t.Errorf("after a release without a reason: LastReason %q, LastFailed %v; want \"\" and %v", got.LastReason, got.LastFailed, at(1500))
		}
		check(t, "Get(a) after the second Release", h.get(delayq.Ref{ID: "a"}), got)
	})
	t.Run("DelayedReleaseTicksReady", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		if _, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(j), Due: at(3000), Now: now}); err != nil {
			t.Fatal(err)
		}
		check(t, "Tick() after a delayed release", h.tick(now, 0), &store.TickResult{Next: at(3000)})
		check(t, "Tick(due)", h.tick(at(3000), 0), &store.TickResult{Ready: map[string]int{"t-a": 1}, Lateness: []time.Duration{0},
			LatenessByTopic: map[string][]time.Duration{"t-a": {0}}})
	})
}

func testTouch(t *testing.T, f Factory) {
	h := open(t, f)
	j := h.putReserved("a", base, nil) // TTR 10s: deadline at(10_000)
	got, err := h.s.Touch(h.ctx, store.TouchParams{Ref: held(j), Now: at(4000)})
	checkErr(t, "Touch()", err, nil)
	want := j.Clone()
	want.Deadline = at(14_000)
	check(t, "Touch(at +4s)", got, want)
	check(t, "Tick(old deadline)", h.tick(at(10_000), 0), &store.TickResult{Next: at(14_000)})
	check(t, "Get(a) after Tick(old deadline)", h.get(delayq.Ref{ID: "a"}), want)
}

func testBury(t *testing.T, f Factory) {
	for _, prio := range []*uint32{nil, u32(3)} {
		name := "KeepsPriority"
		if prio != nil {
			name = "ChangesPriority"
		}
		t.Run(name, func(t *testing.T) {
			h := open(t, f)
			j := h.putReserved("a", base, nil)
			got, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(j), Priority: prio, Reason: "bad payload: " + name, Now: at(2000)})
			checkErr(t, "Bury()", err, nil)
			want := unreserved(j, delayq.StateBuried, at(2000))
			want.Buries = 1
			want.LastReason, want.LastFailed = "bad payload: "+name, at(2000)
			if prio != nil {
				want.Priority = *prio
			}
			check(t, "Bury()", got, want)
			check(t, "Get(a) after Bury", h.get(delayq.Ref{ID: "a"}), want)
			check(t, "Tick() with a buried job", h.tick(at(100_000), 0), &store.TickResult{})
		})
	}
}

func testDelete(t *testing.T, f Factory) {
	t.Run("EveryUnreservedState", func(t *testing.T) {
		h := open(t, f)
		r, d := ready("r", "t"), delayed("d", "t", 100)
		h.put(r, d)
		b := h.putReserved("b", base, nil)
		b, _ = h.s.Bury(h.ctx, store.BuryParams{Ref: held(b), Now: base})
		for _, want := range []*delayq.Job{r, d, b} {
			got, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{Seq: want.Seq}})
			checkErr(t, "Delete("+want.ID+")", err, nil)
			check(t, "Delete("+want.ID+")", got, want)
			checkErr(t, "Get("+want.ID+") after Delete", getErr(h, want.ID), delayq.ErrNotFound)
		}
		check(t, "Tick() after deleting all", h.tick(at(1000), 0), &store.TickResult{})
	})
	t.Run("WithReservation", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		got, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: held(j)})
		checkErr(t, "Delete(a, reservation)", err, nil)
		check(t, "Delete(a, reservation)", got, j)
		checkErr(t, "Get(a) after Delete", getErr(h, "a"), delayq.ErrNotFound)
		check(t, "Tick() after deleting a reserved job", h.tick(at(60_000), 0), &store.TickResult{})
	})
	t.Run("ReservedNeedsReservation", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		_, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "a"}})
		checkErr(t, "Delete(a) without reservation", err, delayq.ErrNotReserved)
		_, err = h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "a", Reservation: "bogus"}})
		checkErr(t, "Delete(a, wrong reservation)", err, delayq.ErrNotReserved)
		check(t, "Get(a) after refused deletes", h.get(delayq.Ref{ID: "a"}), j)
	})
	t.Run("ReservationOnUnreservedJob", func(t *testing.T) {
		h := open(t, f)
		r := ready("r", "t")
		h.put(r)
		_, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "r", Reservation: delayq.ReservationToken(r.Seq, 1)}})
		checkErr(t, "Delete(ready r, reservation)", err, delayq.ErrNotReserved)
		check(t, "Get(r)", h.get(delayq.Ref{ID: "r"}), r)
	})
	t.Run("Force", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		got, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{Seq: j.Seq, Reservation: "bogus"}, Force: true})
		checkErr(t, "Delete(a, force)", err, nil)
		check(t, "Delete(a, force)", got, j)
		checkErr(t, "Get(a) after Delete", getErr(h, "a"), delayq.ErrNotFound)
	})
}

// testDeleteBatch checks that each entry of a batch succeeds or fails as
// Delete would have, in order, and that only the successes are gone.
func testDeleteBatch(t *testing.T, f Factory) {
	h := open(t, f)
	a := h.putReserved("a", base, nil)
	b := h.putReserved("b", base, nil)
	c := h.putReserved("c", base, nil)
	r := ready("r", "t")
	h.put(r)
	ps := []store.DeleteParams{
		{Ref: held(a)},
		{Ref: delayq.Ref{ID: "b", Reservation: "bogus"}},    // stale: b stays
		{Ref: delayq.Ref{ID: "nosuch", Reservation: "1-1"}}, // unknown
		{Ref: held(a)}, // a again: gone by now
		{Ref: delayq.Ref{Seq: c.Seq, Reservation: c.Reservation}}, // by seq
		{Ref: delayq.Ref{ID: "r", Reservation: "1-1"}},            // not reserved
		{Ref: delayq.Ref{ID: "r"}, Force: true},                   // operator delete
	}
	jobs, errs, err := h.s.DeleteBatch(h.ctx, ps)
	checkErr(t, "DeleteBatch()", err, nil)
	if len(jobs) != len(ps) || len(errs) != len(ps) {
		t.Fatalf("DeleteBatch() = %d jobs, %d errs; want %d of each", len(jobs), len(errs), len(ps))
	}
	want := []error{nil, delayq.ErrNotReserved, delayq.ErrNotFound, delayq.ErrNotFound, nil, delayq.ErrNotReserved, nil}
	for i, w := range want {
		checkErr(t, fmt.Sprintf("DeleteBatch() entry %d", i), errs[i], w)
	}
	check(t, "DeleteBatch() job 0", jobs[0], a)
	check(t, "DeleteBatch() job 4", jobs[4], c)
	check(t, "DeleteBatch() job 6", jobs[6], r)
	for _, id := range []string{"a", "c", "r"} {
		checkErr(t, "Get("+id+") after DeleteBatch", getErr(h, id), delayq.ErrNotFound)
	}
	check(t, "Get(b) after a stale entry", h.get(delayq.Ref{ID: "b"}), b)
	jobs, errs, err = h.s.DeleteBatch(h.ctx, nil)
	checkErr(t, "DeleteBatch(nil)", err, nil)
	if len(jobs) != 0 || len(errs) != 0 {
		t.Fatalf("DeleteBatch(nil) = %v, %v; want nothing", jobs, errs)
	}
}

// testStaleReservation checks that a consumer whose TTR ran out cannot act
// on the job another consumer now holds, and that unknown refs are
// ErrNotFound for every consumer call.
func testStaleReservation(t *testing.T, f Factory) {
	calls := []struct {
		name string
		do   func(h *harness, ref delayq.Ref) error
	}{
		{"Finish", func(h *harness, ref delayq.Ref) error {
			_, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: ref})
			return err
		}},
		{"Release", func(h *harness, ref delayq.Ref) error {
			_, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: ref, Due: at(20_000), Now: at(20_000)})
			return err
		}},
		{"Touch", func(h *harness, ref delayq.Ref) error {
			_, err := h.s.Touch(h.ctx, store.TouchParams{Ref: ref, Now: at(20_000)})
			return err
		}},
		{"Bury", func(h *harness, ref delayq.Ref) error {
			_, err := h.s.Bury(h.ctx, store.BuryParams{Ref: ref, Now: at(20_000)})
			return err
		}},
		{"GiveBack", func(h *harness, ref delayq.Ref) error {
			_, err := h.s.GiveBack(h.ctx, store.GiveBackParams{Ref: ref})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			h := open(t, f)
			old := h.putReserved("a", base, nil)
			h.tick(old.Deadline, 0)
			cur := h.reserveOne(at(15_000), old.Topic)
			checkErr(t, c.name+"(a, stale reservation)", c.do(h, held(old)), delayq.ErrNotReserved)
			checkErr(t, c.name+"(#seq, stale reservation)", c.do(h, delayq.Ref{Seq: old.Seq, Reservation: old.Reservation}), delayq.ErrNotReserved)
			checkErr(t, c.name+"(a, no reservation)", c.do(h, delayq.Ref{ID: "a"}), delayq.ErrNotReserved)
			check(t, "Get(a) after stale "+c.name, h.get(delayq.Ref{ID: "a"}), cur)

			h.put(ready("r", "t"), delayed("d", "t", 100))
			for _, id := range []string{"r", "d"} {
				ref := delayq.Ref{ID: id, Reservation: delayq.ReservationToken(0, 1)}
				checkErr(t, c.name+"("+id+") of an unreserved job", c.do(h, ref), delayq.ErrNotReserved)
			}
			for _, ref := range []delayq.Ref{{ID: "nope", Reservation: "1-1"}, {Seq: cur.Seq + 100, Reservation: "1-1"}} {
				checkErr(t, c.name+"("+ref.String()+") of an unknown job", c.do(h, ref), delayq.ErrNotFound)
			}
			checkErr(t, c.name+"(a, current reservation)", c.do(h, held(cur)), nil)
		})
	}
}
