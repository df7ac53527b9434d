package diskstore

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var t0 = time.Date(2030, time.March, 4, 5, 6, 7, 0, time.UTC)

// nearSize is how many delayed jobs memory holds. Requires no concurrent
// calls.
func (s *Store) nearSize() (heap, peak, entries int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.near.q.Len(), s.near.peak, len(s.entries)
}

// TestFarFutureBoundedMemory puts many far-future delayed jobs and checks
// that memory holds at most two chunks of them, while Tick still promotes
// every job, in due order, exactly when the clock reaches it.
func TestFarFutureBoundedMemory(t *testing.T) {
	n, chunk := 100_000, 1024
	if raceEnabled || testing.Short() {
		n = 30_000
	}
	const span = 200_000 // ms over which dues spread, an hour from now
	dir := t.TempDir()
	opts := Options{nearChunk: chunk}
	s := openAt(t, dir, opts)
	r := rand.New(rand.NewPCG(1, 2))
	dues := make([]int64, n)
	for i := range dues {
		dues[i] = int64(r.IntN(span))
	}
	putDelayed(t, s, dues[:n/20], 0)
	// Reopen so that the first chunk loads and sets the horizon: the later
	// puts then land both before it (heap) and after it (disk only).
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, opts)
	defer s.Close()
	putDelayed(t, s, dues[n/20:], n/20)
	// A trim runs after each batch, so the heap holds at most two chunks
	// plus one batch.
	bound := 2*chunk + delayq.MaxBatch
	if _, peak, entries := s.nearSize(); peak > bound || entries > 2*chunk {
		t.Fatalf("after %d far-future puts: near heap peak %d, entries %d; want <= %d, <= %d", n, peak, entries, bound, 2*chunk)
	}

	slices.Sort(dues)
	promoted := 0
	for now := int64(0); now < span+1000; now += 997 {
		got, next := tickUntilIdle(t, s, time.Hour.Milliseconds()+now)
		promoted += got
		want, _ := slices.BinarySearch(dues, now+1)
		if promoted != want {
			t.Fatalf("at +%d ms: %d jobs promoted, want %d (due at or before)", now, promoted, want)
		}
		wantNext := time.Time{}
		if want < n {
			wantNext = t0.Add(time.Hour + time.Duration(dues[want])*time.Millisecond)
		}
		if !next.Equal(wantNext) {
			t.Fatalf("at +%d ms: Tick.Next = %s, want %s", now, next, wantNext)
		}
	}
	if _, peak, _ := s.nearSize(); peak > bound {
		t.Errorf("near heap peak %d, want <= %d", peak, bound)
	}
	ts, err := s.Topics(t.Context())
	if err != nil || len(ts) != 1 || ts[0].Ready != n || ts[0].Delayed != 0 {
		t.Errorf("Topics() = %+v, %v; want one topic with %d ready, 0 delayed", ts, err, n)
	}
}

// putDelayed puts one job due at t0+1h+due ms for each of dues, 1000 per
// batch, numbered from first.
func putDelayed(t *testing.T, s *Store, dues []int64, first int) {
	t.Helper()
	for len(dues) > 0 {
		k := min(1000, len(dues))
		batch := make([]*delayq.Job, k)
		for i, d := range dues[:k] {
			batch[i] = &delayq.Job{
				ID: fmt.Sprintf("j%d", first), Topic: "far", State: delayq.StateDelayed, TTR: time.Minute,
				Due: t0.Add(time.Hour + time.Duration(d)*time.Millisecond), Created: t0,
			}
			first++
		}
		if err := s.Put(t.Context(), batch); err != nil {
			t.Fatalf("Put = %v", err)
		}
		dues = dues[k:]
	}
}

// tickUntilIdle ticks at t0+ms until nothing more is due and returns how
// many jobs became ready and the last Next. It checks that each tick promotes in due order,
// never early, and reports a Next after now.
func tickUntilIdle(t *testing.T, s *Store, ms int64) (int, time.Time) {
	t.Helper()
	now := t0.Add(time.Duration(ms) * time.Millisecond)
	total := 0
	for {
		res, err := s.Tick(t.Context(), store.TickParams{Now: now})
		if err != nil {
			t.Fatalf("Tick = %v", err)
		}
		for i, l := range res.Lateness {
			if l < 0 || (i > 0 && l > res.Lateness[i-1]) {
				t.Fatalf("Tick(%s) lateness %v: early or out of due order", now, res.Lateness)
			}
		}
		total += res.Ready["far"]
		if !res.Next.Equal(now) {
			if !res.Next.IsZero() && !res.Next.After(now) {
				t.Fatalf("Tick(%s).Next = %s, want after now", now, res.Next)
			}
			return total, res.Next
		}
	}
}

// TestNearTermJobsStayInMemory: jobs due within nearWindow of the store's
// clock stay in the heap with their records, however many chunks they
// fill, so the timer reads nothing back from Pebble when a burst of them
// comes due; jobs due later still go to disk past the chunks.
func TestNearTermJobsStayInMemory(t *testing.T) {
	const chunk, n = 16, 3000
	s := openAt(t, t.TempDir(), Options{nearChunk: chunk})
	defer s.Close()
	tickUntilIdle(t, s, time.Hour.Milliseconds()-10_000) // the clock: 10 s before the burst
	dues := make([]int64, n)
	for i := range dues {
		dues[i] = int64(i % 5000) // due over the 5 s after t0+1h
	}
	putDelayed(t, s, dues, 0)
	far := make([]int64, 100)
	for i := range far {
		far[i] = 120_000 + int64(i) // two minutes later: past the window
	}
	putDelayed(t, s, far, n)

	s.mu.Lock()
	inHeap, withRecord := s.near.q.Len(), 0
	for _, e := range s.near.q.es {
		if e.job != nil {
			withRecord++
		}
	}
	s.mu.Unlock()
	if inHeap != n || withRecord != n {
		t.Fatalf("near heap holds %d jobs, %d with their records; want the %d due within the window, all with records", inHeap, withRecord, n)
	}
	if got, _ := tickUntilIdle(t, s, time.Hour.Milliseconds()+5000); got != n {
		t.Fatalf("Tick at the end of the burst promoted %d, want %d", got, n)
	}
	if got, _ := tickUntilIdle(t, s, time.Hour.Milliseconds()+200_000); got != len(far) {
		t.Fatalf("Tick past the later jobs promoted %d, want %d", got, len(far))
	}
}

// TestNearTermJobsSpillBacklogRecords: when a backlog of ready jobs holds
// the whole hot budget, jobs due within the near-future window still get
// their records, taken from the back of the backlog's queue; the front of
// the backlog keeps its records, the budget holds, and the spilled jobs
// are still served, in order, from Pebble. In the second case only the
// older half of the backlog got records before the budget ran out (as in
// the full bench.sh run): the spill walks past the newer half to reach
// them, refusing at most one near-term job per spillScan entries passed.
func TestNearTermJobsSpillBacklogRecords(t *testing.T) {
	const backlog, burst = 4000, 300
	for _, tc := range []struct {
		name   string
		hot    int // backlog jobs the budget fits
		missed int // near-term jobs that may go without records
	}{
		{"whole backlog hot", backlog, 0},
		{"older half hot", backlog / 2, (backlog/2)/spillScan + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j0 := &delayq.Job{ID: "b00000", Topic: "backlog", Body: make([]byte, 100)}
			s := openAt(t, t.TempDir(), Options{HotSize: tc.hot * hotSize(j0)})
			defer s.Close()
			tickUntilIdle(t, s, time.Hour.Milliseconds()-10_000) // the clock: 10 s before the burst
			for i := 0; i < backlog; i += 1000 {
				batch := make([]*delayq.Job, 1000)
				for k := range batch {
					batch[k] = &delayq.Job{ID: fmt.Sprintf("b%05d", i+k), Topic: "backlog", Body: make([]byte, 100),
						State: delayq.StateReady, TTR: time.Minute, Due: t0, Created: t0, Priority: delayq.DefaultPriority}
				}
				if err := s.Put(t.Context(), batch); err != nil {
					t.Fatal(err)
				}
			}
			hotReady := func() (front, all int) {
				s.mu.Lock()
				defer s.mu.Unlock()
				for i, e := range s.topics["backlog"].byPri.es {
					if e.job != nil {
						all++
						if i < spillKeepFront {
							front++
						}
					}
				}
				return front, all
			}
			if _, all := hotReady(); all != tc.hot {
				t.Fatalf("backlog: %d of %d ready jobs hold records; want %d, what the budget fits", all, backlog, tc.hot)
			}
			putDelayed(t, s, make([]int64, burst), 0) // all due at t0+1h, within the window
			s.mu.Lock()
			withRecord, hot, hotMax := 0, s.hot, s.hotMax
			for _, e := range s.near.q.es {
				if e.job != nil {
					withRecord++
				}
			}
			s.mu.Unlock()
			if withRecord < burst-tc.missed {
				t.Errorf("near heap: %d of %d jobs due within the window hold records; want at least %d", withRecord, burst, burst-tc.missed)
			}
			if hot > hotMax {
				t.Errorf("hot = %d bytes, over the budget of %d", hot, hotMax)
			}
			front, all := hotReady()
			if front != spillKeepFront || all >= tc.hot || all < tc.hot-burst {
				t.Errorf("backlog after the burst: %d ready jobs hold records, %d of the first %d; want all of those, and between %d and %d in all", all, front, spillKeepFront, tc.hot-burst, tc.hot-1)
			}
			// Every backlog job is still served, in order, records from Pebble or not.
			for i := range backlog {
				js, err := s.Reserve(t.Context(), store.ReserveParams{Topics: []string{"backlog"}, Max: 1, Now: t0.Add(time.Second)})
				if err != nil || len(js) != 1 || js[0].ID != fmt.Sprintf("b%05d", i) || len(js[0].Body) != 100 {
					t.Fatalf("reserve %d = %v, %v; want b%05d with its body", i, js, err, i)
				}
			}
		})
	}
}
