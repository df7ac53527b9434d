package storetest

import (
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// reopen closes the harness's store and opens its data again.
func (h *harness) reopen() {
	h.t.Helper()
	h.s = h.f.Reopen(h.t, h.s)
}

// testPersistence checks that a reopened store holds every job in its
// state with every field, keeps its pauses and never reuses a seq.
func testPersistence(t *testing.T, f Factory) {
	if f.Reopen == nil {
		t.Skip("Factory.Reopen is nil: the store is not durable")
	}
	t.Run("EveryStateAndField", func(t *testing.T) {
		h := open(t, f)
		byState := mixed(h)
		bin := &delayq.Job{
			ID: "bin", Topic: "v", Body: []byte{0, 0xff, '\n'}, Priority: 7, TTR: 2500 * time.Millisecond,
			MaxAttempts: 4, State: delayq.StateDelayed, Due: at(99_999_999), Created: at(-3), Delay: 12345 * time.Millisecond,
		}
		h.put(bin)
		h.pause("u", at(60_000))
		wantTopics := h.topics()
		all := append(allStates(byState), bin)
		h.reopen()
		for _, want := range all {
			check(t, "Get("+want.ID+") after reopen", h.get(delayq.Ref{ID: want.ID}), want)
			check(t, "Get(#seq of "+want.ID+") after reopen", h.get(delayq.Ref{Seq: want.Seq}), want)
		}
		check(t, "List(t) after reopen", h.list("t", "", 3), allStates(byState))
		check(t, "Topics() after reopen", h.topics(), wantTopics)
		check(t, "Reserve(u) before its pause ends, after reopen", h.reserve(at(59_999), 1, "u"), []*delayq.Job{})
	})
	t.Run("ReservationSurvives", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		h.reopen()
		check(t, "Tick(deadline-1ms) after reopen", h.tick(j.Deadline.Add(-time.Millisecond), 0), &store.TickResult{Next: j.Deadline})
		// Touch no earlier than the Tick above: Now never goes back.
		touchAt := j.Deadline.Add(-time.Millisecond)
		got, err := h.s.Touch(h.ctx, store.TouchParams{Ref: held(j), Now: touchAt})
		checkErr(t, "Touch(a, reservation from before reopen)", err, nil)
		want := j.Clone()
		want.Deadline = touchAt.Add(j.TTR)
		check(t, "Touch(a) after reopen", got, want)
		h.reopen()
		_, err = h.s.Delete(h.ctx, store.DeleteParams{Ref: held(j)})
		checkErr(t, "Delete(a, reservation from before two reopens)", err, nil)
	})
	t.Run("SeqNeverReused", func(t *testing.T) {
		h := open(t, f)
		a, b := ready("a", "t"), ready("b", "t")
		h.put(a, b)
		if _, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "b"}}); err != nil {
			t.Fatal(err)
		}
		h.reopen()
		c := ready("c", "t")
		h.put(c)
		if c.Seq <= b.Seq {
			t.Errorf("Put(c) after reopen: seq %d, want > %d (the last seq before reopen)", c.Seq, b.Seq)
		}
		check(t, "Get(a) after reopen", h.get(delayq.Ref{ID: "a"}), a)
		checkErr(t, "Get(b) deleted before reopen", getErr(h, "b"), delayq.ErrNotFound)
	})
	t.Run("EmptyStore", func(t *testing.T) {
		h := open(t, f)
		h.reopen()
		check(t, "Topics() of a reopened empty store", h.topics(), []delayq.TopicStats{})
		check(t, "Tick() of a reopened empty store", h.tick(base, 0), &store.TickResult{})
	})
}
