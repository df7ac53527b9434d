package storetest

import (
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// giveBack gives back the job ref names and fails the test on an error.
func (h *harness) giveBack(ref delayq.Ref) *delayq.Job {
	h.t.Helper()
	j, err := h.s.GiveBack(h.ctx, store.GiveBackParams{Ref: ref})
	if err != nil {
		h.t.Fatalf("GiveBack(%+v) = %v, want nil", ref, err)
	}
	return j
}

// testGiveBack checks Store.GiveBack: a reservation its consumer never
// received is undone as if the reserve had not happened, so it costs no
// attempt (a max_attempts=1 job is not buried) and records no failure.
func testGiveBack(t *testing.T, f Factory) {
	t.Run("CostsNoAttempt", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t")
		a.MaxAttempts = 1
		h.put(a)
		r := h.reserveOne(at(100), "t")
		got := h.giveBack(held(r))
		check(t, "GiveBack(a)", got, a)
		check(t, "Get(a) after GiveBack", h.get(delayq.Ref{ID: "a"}), a)
		check(t, "Tick(old deadline) after GiveBack", h.tick(r.Deadline, 0), &store.TickResult{})
		// The one attempt is still there: the next consumer gets the job.
		again := h.reserveOne(r.Deadline, "t")
		check(t, "Reserve(t) after GiveBack", again, reservedAs(a, r.Deadline))
	})
	t.Run("KeepsHistory", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, func(j *delayq.Job) { j.MaxAttempts = 3 })
		rel, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(j), Due: at(10), Reason: "first try failed", Now: at(10)})
		checkErr(t, "Release(a)", err, nil)
		r := h.reserveOne(at(20), j.Topic)
		got := h.giveBack(held(r))
		check(t, "GiveBack(a) after a release", got, rel)
		check(t, "Get(a) after GiveBack", h.get(delayq.Ref{ID: "a"}), rel)
	})
	t.Run("KeepsServingOrder", func(t *testing.T) {
		h := open(t, f)
		a, b := ready("a", "t"), ready("b", "t")
		h.put(a, b)
		r := h.reserveOne(at(10), "t")
		h.giveBack(held(r))
		check(t, "Reserve(t, max 2) after giving a back", h.reserve(at(20), 2, "t"),
			[]*delayq.Job{reservedAs(a, at(20)), reservedAs(b, at(20))})
	})
	t.Run("ReserveJobOfBuried", func(t *testing.T) {
		// A job reserve-job took out of buried goes back ready (as
		// beanstalkd readies a closed connection's jobs), its bury kept.
		h := open(t, f)
		b := h.buryAt("b", "t", at(10))
		r, err := h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: delayq.Ref{Seq: b.Seq}, Now: at(20)})
		checkErr(t, "ReserveJob(b)", err, nil)
		want := b.Clone()
		want.State = delayq.StateReady
		check(t, "GiveBack(b) after ReserveJob", h.giveBack(held(r)), want)
		check(t, "Topics() after GiveBack", h.topics(), []delayq.TopicStats{{Name: "t", Ready: 1, OldestReady: at(10)}})
	})
	t.Run("NeedsItsReservation", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		for _, ref := range []delayq.Ref{{ID: "a"}, {ID: "a", Reservation: "bogus"}, {Seq: j.Seq, Reservation: delayq.ReservationToken(j.Seq, 2)}} {
			_, err := h.s.GiveBack(h.ctx, store.GiveBackParams{Ref: ref})
			checkErr(t, "GiveBack("+ref.String()+", reservation "+ref.Reservation+")", err, delayq.ErrNotReserved)
		}
		_, err := h.s.GiveBack(h.ctx, store.GiveBackParams{Ref: delayq.Ref{ID: "nope", Reservation: "1-1"}})
		checkErr(t, "GiveBack(nope)", err, delayq.ErrNotFound)
		check(t, "Get(a) after refused give-backs", h.get(delayq.Ref{ID: "a"}), j)
		h.giveBack(delayq.Ref{Seq: j.Seq, Reservation: j.Reservation}) // by seq, as beanstalkd names jobs
		_, err = h.s.GiveBack(h.ctx, store.GiveBackParams{Ref: held(j)})
		checkErr(t, "GiveBack(a) twice", err, delayq.ErrNotReserved)
	})
	t.Run("Persists", func(t *testing.T) {
		if f.Reopen == nil {
			t.Skip("Factory.Reopen is nil: the store is not durable")
		}
		h := open(t, f)
		a := ready("a", "t")
		a.MaxAttempts = 1
		h.put(a)
		h.giveBack(held(h.reserveOne(at(100), "t")))
		h.reopen()
		check(t, "Get(a) after GiveBack and reopen", h.get(delayq.Ref{ID: "a"}), a)
		check(t, "Reserve(t) after reopen", h.reserveOne(at(200), "t"), reservedAs(a, at(200)))
	})
}

// testDeadlineRoundsUp checks that a TTR runs from the exact instant of
// the call that starts it: a Now in the middle of a millisecond gives a
// Deadline rounded up to the next one, so a Tick cannot hand the job to a
// second consumer up to a millisecond before the first one's TTR ends.
func testDeadlineRoundsUp(t *testing.T, f Factory) {
	const half = 500 * time.Microsecond
	t.Run("Reserve", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t") // TTR 10 s
		h.put(a)
		got := h.reserveOne(at(100).Add(half), "t")
		check(t, "Reserve(t) at +100.5ms", got, reservedAs(a, at(101)))
		check(t, "Tick(+100.5ms+TTR truncated)", h.tick(at(10_100), 0), &store.TickResult{Next: at(10_101)})
		check(t, "Tick(+101ms+TTR)", h.tick(at(10_101), 0), &store.TickResult{Ready: map[string]int{"t": 1}, Next: time.Time{}})
	})
	t.Run("ReserveOnTheMillisecond", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t")
		h.put(a)
		check(t, "Reserve(t) at +100ms exactly", h.reserveOne(at(100), "t"), reservedAs(a, at(100)))
	})
	t.Run("ReserveOfJobDueLater", func(t *testing.T) {
		// A ready job whose Due is past the reserve's Now (a put whose
		// clock read came later) still begins its TTR at its Due.
		h := open(t, f)
		a := newJob("a", "t", at(5), at(5))
		h.put(a)
		check(t, "Reserve(t) at +0.5ms of a job due at +5ms", h.reserveOne(base.Add(half), "t"), reservedAs(a, at(5)))
	})
	t.Run("ReserveJob", func(t *testing.T) {
		h := open(t, f)
		a := delayed("a", "t", 5000)
		h.put(a)
		got, err := h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "a"}, Now: at(100).Add(999 * time.Microsecond)})
		checkErr(t, "ReserveJob(a)", err, nil)
		check(t, "ReserveJob(a) at +100.999ms", got, reservedAs(a, at(101)))
	})
	t.Run("Touch", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		got, err := h.s.Touch(h.ctx, store.TouchParams{Ref: held(j), Now: at(4000).Add(time.Microsecond)})
		checkErr(t, "Touch(a)", err, nil)
		want := j.Clone()
		want.Deadline = at(14_001)
		check(t, "Touch(a) at +4000.001ms", got, want)
		check(t, "Tick(touch instant truncated + TTR)", h.tick(at(14_000), 0), &store.TickResult{Next: at(14_001)})
	})
	t.Run("ClockAheadWins", func(t *testing.T) {
		// A store that already acted at a later time (Now never goes
		// back) begins the TTR there, rounded instant or not.
		h := open(t, f)
		a, b := ready("a", "t"), ready("b", "t")
		h.put(a, b)
		h.reserveOne(at(200), "t")
		check(t, "Reserve(t) at +100.5ms after one at +200ms", h.reserveOne(at(100).Add(half), "t"), reservedAs(b, at(200)))
	})
}
