package storetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// mixed fills topic "t" with two jobs in every state, each pair placed so
// that its List order differs from seq order, plus noise in topic "u". It
// returns t's jobs in List order per state.
func mixed(h *harness) map[delayq.State][]*delayq.Job {
	h.t.Helper()
	k1, k2, q1, q2 := ready("k1", "t"), ready("k2", "t"), ready("q1", "t"), ready("q2", "t")
	k1.Priority, k2.Priority, q1.Priority, q2.Priority = 1, 1, 2, 2
	d1, d2, d3 := delayed("d1", "t", 3000), delayed("d2", "t", 1000), delayed("d3", "t", 3000)
	h.put(k1, k2, q1, q2, d1, d2, d3, ready("u1", "u"), delayed("u2", "u", 10))

	ks := h.reserve(base, 2, "t") // k1, k2; touching k1 puts its deadline last
	k1t, err := h.s.Touch(h.ctx, store.TouchParams{Ref: held(ks[0]), Now: at(1)})
	if err != nil {
		h.t.Fatalf("Touch(k1) = %v", err)
	}
	qs := h.reserve(at(2), 2, "t") // q1, q2; q2 is buried first
	q2b, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(qs[1]), Now: at(3)})
	if err != nil {
		h.t.Fatalf("Bury(q2) = %v", err)
	}
	q1b, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(qs[0]), Now: at(4)})
	if err != nil {
		h.t.Fatalf("Bury(q1) = %v", err)
	}

	r5, r6 := ready("r5", "t"), ready("r6", "t")
	h.put(r5, r6)
	r6u, err := h.s.Update(h.ctx, store.UpdateParams{Ref: delayq.Ref{ID: "r6"}, Priority: u32(0), Now: at(5)})
	if err != nil {
		h.t.Fatalf("Update(r6) = %v", err)
	}
	return map[delayq.State][]*delayq.Job{
		delayq.StateReady:    {r6u, r5},
		delayq.StateDelayed:  {d2, d1, d3},
		delayq.StateReserved: {ks[1], k1t},
		delayq.StateBuried:   {q2b, q1b},
	}
}

func testList(t *testing.T, f Factory) {
	t.Run("EachStateInOrder", func(t *testing.T) {
		h := open(t, f)
		want := mixed(h)
		for _, st := range []delayq.State{delayq.StateReady, delayq.StateDelayed, delayq.StateReserved, delayq.StateBuried} {
			check(t, fmt.Sprintf("List(t, %s)", st), h.list("t", st, 0), want[st])
		}
	})
	t.Run("AllStatesInOrder", func(t *testing.T) {
		h := open(t, f)
		want := allStates(mixed(h))
		check(t, "List(t, all)", h.list("t", "", 100), want)
	})
	t.Run("PagesWithoutGapsOrDuplicates", func(t *testing.T) {
		h := open(t, f)
		byState := mixed(h)
		for _, limit := range []int{1, 2, 3, 4, 9, 10} {
			check(t, fmt.Sprintf("List(t, all, pages of %d)", limit), h.list("t", "", limit), allStates(byState))
			for st, want := range byState {
				check(t, fmt.Sprintf("List(t, %s, pages of %d)", st, limit), h.list("t", st, limit), want)
			}
		}
	})
	t.Run("LastPageHasNoNext", func(t *testing.T) {
		h := open(t, f)
		h.put(ready("a", "t"), ready("b", "t"))
		res, err := h.s.List(h.ctx, store.ListParams{Topic: "t", Limit: 2})
		checkErr(t, "List(t, limit 2)", err, nil)
		if err == nil && (len(res.Jobs) != 2 || res.Next != "") {
			t.Errorf("List(t, limit 2) of 2 jobs = %d jobs, next %q; want 2, \"\"", len(res.Jobs), res.Next)
		}
	})
	t.Run("UnknownTopic", func(t *testing.T) {
		h := open(t, f)
		h.put(ready("a", "t"))
		check(t, "List(unknown)", h.list("unknown", "", 10), []*delayq.Job{})
	})
}

func allStates(byState map[delayq.State][]*delayq.Job) []*delayq.Job {
	var all []*delayq.Job
	for _, st := range []delayq.State{delayq.StateReady, delayq.StateDelayed, delayq.StateReserved, delayq.StateBuried} {
		all = append(all, byState[st]...)
	}
	return all
}

func testTopics(t *testing.T, f Factory) {
	t.Run("CountsPerState", func(t *testing.T) {
		h := open(t, f)
		mixed(h)
		h.pause("u", at(60_000))
		want := []delayq.TopicStats{
			{Name: "t", Delayed: 3, Ready: 2, Reserved: 2, Buried: 2, Urgent: 1, OldestReady: base},
			{Name: "u", Delayed: 1, Ready: 1, OldestReady: base, PausedUntil: at(60_000)},
		}
		check(t, "Topics()", h.topics(), want)
	})
	t.Run("UrgentAndOldestReady", func(t *testing.T) {
		h := open(t, f)
		a, b, c := newJob("a", "t", at(50), at(50)), newJob("b", "t", at(20), at(20)), newJob("c", "t", at(30), at(30))
		a.Priority, b.Priority, c.Priority = 1023, 1024, 0
		h.put(a, b, c)
		check(t, "Topics()", h.topics(), []delayq.TopicStats{{Name: "t", Ready: 3, Urgent: 2, OldestReady: at(20)}})
	})
	t.Run("PausedEmptyTopicListed", func(t *testing.T) {
		h := open(t, f)
		h.pause("p", at(5000))
		check(t, "Topics() with p paused", h.topics(), []delayq.TopicStats{{Name: "p", PausedUntil: at(5000)}})
		h.pause("p", time.Time{})
		check(t, "Topics() after unpause", h.topics(), []delayq.TopicStats{})
	})
	t.Run("GoneWhenEmpty", func(t *testing.T) {
		h := open(t, f)
		h.put(ready("a", "t"), ready("z", "zz"))
		j := h.reserveOne(base, "t")
		if _, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: held(j)}); err != nil {
			t.Fatal(err)
		}
		check(t, "Topics() after deleting t's only job", h.topics(), []delayq.TopicStats{{Name: "zz", Ready: 1, OldestReady: base}})
	})
}

func testClose(t *testing.T, f Factory) {
	h := open(t, f)
	h.put(ready("a", "t"))
	h.closed = true
	if err := h.s.Close(); err != nil {
		t.Fatalf("Close() = %v, want nil", err)
	}
	if _, err := h.s.Get(h.ctx, delayq.Ref{ID: "a"}); err == nil {
		t.Errorf("Get(a) after Close = nil error, want an error")
	}
	if err := h.s.Put(h.ctx, []*delayq.Job{ready("b", "t")}); err == nil {
		t.Errorf("Put(b) after Close = nil error, want an error")
	}
}
