package diskstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestHotBudgetSpills puts more ready and near-future delayed jobs than
// the hot budget holds: the budget is respected, and every job still comes
// out in serving order with its own body, across a restart too.
func TestHotBudgetSpills(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	now := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	const n = 300
	job := func(i int) *delayq.Job {
		j := &delayq.Job{
			ID: fmt.Sprintf("job-%03d", i), Topic: "t", TTR: time.Minute, Created: now,
			Body: []byte(fmt.Sprintf("body of job %d, padded %0100d", i, i)), Priority: uint32(n - i),
			State: delayq.StateReady, Due: now,
		}
		if i%3 == 0 { // every third is due a little later: near-future delayed
			j.State, j.Due = delayq.StateDelayed, now.Add(time.Duration(i)*time.Millisecond)
		}
		return j
	}
	budget := 20 * hotSize(job(0))
	s := openAt(t, dir, Options{HotSize: budget, nearChunk: 16})
	for i := range n {
		if err := s.Put(ctx, []*delayq.Job{job(i)}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Lock()
	hot, held := s.hot, 0
	for _, e := range s.entries {
		if e.job != nil {
			held++
		}
	}
	s.mu.Unlock()
	if hot > budget || held == 0 || held >= n {
		t.Fatalf("hot = %d bytes in %d records, want within %d bytes and some but not all of %d jobs", hot, held, budget, n)
	}

	// Half now, half after a restart, which brings every job back cold.
	got := drain(t, s, now, n/2)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{HotSize: budget, nearChunk: 16})
	defer s.Close()
	got = append(got, drain(t, s, now, n-n/2)...)

	// Serving order is priority, and priority falls with i; delayed jobs
	// join as the timer readies them, all before the reserves start.
	for k, j := range got {
		want := job(n - 1 - k)
		if j.ID != want.ID || string(j.Body) != string(want.Body) {
			t.Fatalf("reserve %d got %s %q, want %s %q", k, j.ID, j.Body, want.ID, want.Body)
		}
	}
	if ts, err := s.Topics(ctx); err != nil || len(ts) != 0 {
		t.Fatalf("Topics() = %v, %v; want no topic left", ts, err)
	}
}

// drain readies every due job, then reserves and finishes k jobs one at
// a time, returning them in the order they were served.
func drain(t *testing.T, s *Store, now time.Time, k int) []*delayq.Job {
	t.Helper()
	ctx := t.Context()
	later := now.Add(time.Second)
	for {
		res, err := s.Tick(ctx, store.TickParams{Now: later})
		if err != nil {
			t.Fatal(err)
		}
		if res.Next.IsZero() || res.Next.After(later) {
			break
		}
	}
	var out []*delayq.Job
	for range k {
		js, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 1, Now: later})
		if err != nil || len(js) != 1 {
			t.Fatalf("Reserve = %v, %v; want one job", js, err)
		}
		ps := []store.DeleteParams{{Ref: delayq.Ref{ID: js[0].ID, Reservation: js[0].Reservation}}}
		if _, errs, err := s.DeleteBatch(ctx, ps); err != nil || errs[0] != nil {
			t.Fatalf("DeleteBatch = %v, %v", errs, err)
		}
		out = append(out, js[0])
	}
	return out
}

// TestOpenLockedNamesTheLock opens a directory a store already holds: the
// error says the directory is in use, not a bare errno.
func TestOpenLockedNamesTheLock(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	defer s.Close()
	_, err := Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "in use by another delayq server") {
		t.Fatalf("Open(held dir) = %v, want an error naming the held lock", err)
	}
}

// TestChurnThroughCompactions runs jobs through every transition with a
// tiny memtable, so sets and their single deletes meet in many flushes,
// then compacts everything and reopens: no deleted key comes back (the
// indexes, counters and records agree with what is live).
func TestChurnThroughCompactions(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	opts := Options{MemTableSize: 1 << 20, nearChunk: 8}
	s := openAt(t, dir, opts)
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	live := map[string]bool{}
	for round := range 40 {
		var jobs []*delayq.Job
		for i := range 50 {
			id := fmt.Sprintf("r%d-%d", round, i)
			j := &delayq.Job{ID: id, Topic: "t", Body: make([]byte, 200), TTR: time.Second, State: delayq.StateReady, Due: now, Created: now}
			if i%5 == 0 {
				j.State, j.Due = delayq.StateDelayed, now.Add(time.Duration(i)*time.Millisecond)
			}
			jobs = append(jobs, j)
			live[id] = true
		}
		if err := s.Put(ctx, jobs); err != nil {
			t.Fatal(err)
		}
		now = now.Add(time.Second)
		if _, err := s.Tick(ctx, store.TickParams{Now: now}); err != nil {
			t.Fatal(err)
		}
		js, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 40, Now: now})
		if err != nil {
			t.Fatal(err)
		}
		for k, j := range js {
			ref := delayq.Ref{ID: j.ID, Reservation: j.Reservation}
			switch k % 4 {
			case 0, 1: // finished
				if _, err := s.Delete(ctx, store.DeleteParams{Ref: ref}); err != nil {
					t.Fatal(err)
				}
				delete(live, j.ID)
			case 2: // touched, then released with the same priority: same X key again
				if _, err := s.Touch(ctx, store.TouchParams{Ref: ref, Now: now}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.Release(ctx, store.ReleaseParams{Ref: ref, Due: now, Now: now}); err != nil {
					t.Fatal(err)
				}
			case 3: // left to time out
			}
		}
	}
	if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, true); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, opts)
	defer s.Close()
	ts, err := s.Topics(ctx)
	if err != nil || len(ts) != 1 {
		t.Fatalf("Topics() = %v, %v", ts, err)
	}
	if n := ts[0].Ready + ts[0].Delayed + ts[0].Reserved + ts[0].Buried; n != len(live) {
		t.Fatalf("counters say %d live jobs, want %d", n, len(live))
	}
	seen := 0
	for cursor, pages := "", 0; ; pages++ {
		if pages > len(live) {
			t.Fatalf("List did not end after %d pages", pages)
		}
		page, err := s.List(ctx, store.ListParams{Topic: "t", Cursor: cursor, Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range page.Jobs {
			if !live[j.ID] {
				t.Fatalf("deleted job %s listed after compaction", j.ID)
			}
			seen++
		}
		if cursor = page.Next; cursor == "" {
			break
		}
	}
	if seen != len(live) {
		t.Fatalf("List found %d jobs, want %d", seen, len(live))
	}
	// Every job can still be finished or deleted, which reads its index.
	now = now.Add(time.Hour)
	for steps := 0; ; steps++ {
		if steps > len(live) {
			t.Fatalf("Tick still has work after %d steps", steps)
		}
		res, err := s.Tick(ctx, store.TickParams{Now: now})
		if err != nil {
			t.Fatal(err)
		}
		if res.Next.IsZero() || res.Next.After(now) {
			break
		}
	}
	for id := range live {
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id}, Force: true}); err != nil {
			t.Fatalf("Delete(%s) = %v", id, err)
		}
	}
}
