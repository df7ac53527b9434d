package storetest

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// testTickHandOff checks TickParams.Claim: a Tick asks once for the
// reserves that take the jobs it makes ready (counted by topic, paused
// topics left out), reserves for each Take in order up to its Max in
// priority-then-seq order, as Reserve would at the Take's Now and By,
// and leaves the taken jobs out of Ready.
func testTickHandOff(t *testing.T, f Factory) {
	if !f.HandsOff {
		t.Skip("the store makes jobs ready at Tick and leaves the reserving to Reserve (Factory.HandsOff unset)")
	}
	h := open(t, f)
	urgent := delayed("a-urgent", "a", 200)
	urgent.Priority = 1
	b := delayed("b", "b", 150)
	b.Priority = 5
	h.put(delayed("a-first", "a", 100), urgent, b, delayed("c", "c", 100), delayed("a-later", "a", 10_000))
	h.pause("c", at(60_000))

	now := at(500)
	var calls int
	var counts map[string]int
	takes := []store.Take{
		{Topics: []string{"a"}, Max: 1, Now: now, By: "first"},
		{Topics: []string{"b", "a"}, Max: 5, Now: now, By: "second"},
	}
	res, err := h.s.Tick(h.ctx, store.TickParams{Now: now, Claim: func(ready map[string]int) []store.Take {
		calls++
		counts = ready
		return takes
	}})
	if err != nil {
		t.Fatalf("Tick with Claim = %v, want nil", err)
	}
	if calls != 1 {
		t.Fatalf("Claim called %d times, want once", calls)
	}
	if diff := cmp.Diff(map[string]int{"a": 2, "b": 1}, counts); diff != "" {
		t.Errorf("Claim's ready counts (-want +got), paused topic c left out:\n%s", diff)
	}
	var got [][]string
	for _, js := range res.Taken {
		var names []string
		for _, j := range js {
			names = append(names, j.ID)
		}
		got = append(got, names)
	}
	if diff := cmp.Diff([][]string{{"a-urgent"}, {"b", "a-first"}}, got); diff != "" {
		t.Fatalf("Taken (-want +got): in Take order, priority then seq within one:\n%s", diff)
	}
	if diff := cmp.Diff(map[string]int{"c": 1}, res.Ready, cmpOpts); diff != "" {
		t.Errorf("Ready (-want +got): the taken jobs left out:\n%s", diff)
	}
	if len(res.Lateness) != 4 {
		t.Errorf("Lateness has %d entries, want 4: a job handed off still fired", len(res.Lateness))
	}
	for i, js := range res.Taken {
		for _, j := range js {
			stored := h.get(delayq.Ref{ID: j.ID})
			want := now.Add(stored.TTR)
			if stored.State != delayq.StateReserved || stored.Attempts != 1 || !stored.Deadline.Equal(want) ||
				stored.Reservation == "" || stored.Reservation != j.Reservation {
				t.Errorf("job %s after the hand-off: state %s, attempts %d, deadline %v, reservation %q (handed %q); want reserved, 1, %v, the handed one",
					j.ID, stored.State, stored.Attempts, stored.Deadline, stored.Reservation, j.Reservation, want)
			}
			if n := len(stored.History); n > 0 && (stored.History[n-1].By != takes[i].By || !stored.History[n-1].Reserved.Equal(now)) {
				t.Errorf("job %s's attempt: by %q at %v, want by %q at %v", j.ID, stored.History[n-1].By, stored.History[n-1].Reserved, takes[i].By, now)
			}
		}
	}
	if jobs := h.reserve(at(600), 10, "a", "b", "c"); len(jobs) != 0 {
		t.Errorf("Reserve after the hand-off = %s, want none (taken, paused, or not due)", ids(jobs))
	}
	// The handed reservation finishes the job, as a reserved one's does.
	j := res.Taken[0][0]
	if _, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Now: at(700)}); err != nil {
		t.Errorf("finishing a handed job with its reservation = %v, want nil", err)
	}

	// A Tick that makes nothing ready does not ask.
	res, err = h.s.Tick(h.ctx, store.TickParams{Now: at(800), Claim: func(map[string]int) []store.Take {
		t.Error("Claim called by a Tick that made nothing ready")
		return nil
	}})
	if err != nil || res.Taken != nil {
		t.Errorf("Tick making nothing ready = %v, Taken %v; want nil, nil", err, res.Taken)
	}
}
