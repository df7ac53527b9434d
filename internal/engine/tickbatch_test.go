package engine

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// tickSpy records each store Tick: when it ran, its Max, and how many
// waiters the engine had woken before it began.
type tickSpy struct {
	store.Store
	e *Engine

	mu    sync.Mutex
	ticks []spiedTick
}

type spiedTick struct {
	at    time.Time
	max   int
	woken int
}

func (s *tickSpy) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	s.e.waiters.mu.Lock()
	woken := s.e.waiters.woken
	s.e.waiters.mu.Unlock()
	s.mu.Lock()
	s.ticks = append(s.ticks, spiedTick{at: time.Now(), max: p.Max, woken: woken})
	s.mu.Unlock()
	return s.Store.Tick(ctx, p)
}

// TestBurstFirstTickIsSmall: when more jobs fall due at once than one
// Tick moves, the timer's first Tick moves firstTickBatch and wakes the
// waiters before the next, full batch is moved; the rest follows in
// TickBatch steps at the same instant and every job is handed out.
func TestBurstFirstTickIsSmall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const batch, jobs, waiting = 100, 250, 8
		spy := &tickSpy{Store: memstore.New()}
		e := New(spy, Config{TickBatch: batch})
		spy.e = e
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		defer func() { cancel(); <-done }()

		reqs := make([]PutRequest, jobs)
		for i := range reqs {
			reqs[i] = PutRequest{Topic: "t", Delay: ptr(time.Second)}
		}
		if _, err := e.Put(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
		due := time.Now().Add(time.Second)
		var wg sync.WaitGroup
		for range waiting {
			wg.Go(func() {
				got, err := e.Reserve(context.Background(), ReserveRequest{Topics: []string{"t"}, Wait: time.Minute})
				if err != nil || len(got) != 1 {
					t.Errorf("waiter: Reserve = %d jobs, %v", len(got), err)
				}
			})
		}
		synctest.Wait()
		if w := e.Waiting("t"); w != waiting {
			t.Fatalf("Waiting = %d, want %d", w, waiting)
		}
		wg.Wait()       // the fake clock runs to the due time and the timer fires
		synctest.Wait() // and moves the rest
		got, err := e.Reserve(context.Background(), ReserveRequest{Topics: []string{"t"}, N: jobs})
		if err != nil || len(got) != jobs-waiting {
			t.Fatalf("after the burst Reserve = %d jobs, %v; want the other %d ready", len(got), err, jobs-waiting)
		}

		spy.mu.Lock()
		defer spy.mu.Unlock()
		var at []spiedTick
		for _, tk := range spy.ticks {
			if !tk.at.Before(due) {
				at = append(at, tk)
			}
		}
		if len(at) < 3 {
			t.Fatalf("%d Ticks at the due instant, want 3 (64, then 100s): %+v", len(at), at)
		}
		if at[0].max != firstTickBatch || at[1].max != batch || at[2].max != batch {
			t.Errorf("Tick sizes at the due instant %d, %d, %d; want %d, %d, %d", at[0].max, at[1].max, at[2].max, firstTickBatch, batch, batch)
		}
		if at[1].woken < waiting {
			t.Errorf("%d of %d waiters woken before the second Tick, want all: the first batch readied %d jobs", at[1].woken, waiting, firstTickBatch)
		}
	})
}

// TestSmallTickBatchCapsFirstTick: a TickBatch below firstTickBatch
// bounds every Tick, the first too.
func TestSmallTickBatchCapsFirstTick(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spy := &tickSpy{Store: memstore.New()}
		e := New(spy, Config{TickBatch: 10})
		spy.e = e
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		defer func() { cancel(); <-done }()
		reqs := make([]PutRequest, 25)
		for i := range reqs {
			reqs[i] = PutRequest{Topic: "t", Delay: ptr(time.Second)}
		}
		if _, err := e.Put(context.Background(), reqs); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		got, err := e.Reserve(context.Background(), ReserveRequest{Topics: []string{"t"}, N: 100})
		if err != nil || len(got) != 25 {
			t.Fatalf("Reserve = %d jobs, %v; want 25", len(got), err)
		}
		spy.mu.Lock()
		defer spy.mu.Unlock()
		for _, tk := range spy.ticks {
			if tk.max != 10 {
				t.Fatalf("a Tick moved up to %d, want at most TickBatch 10", tk.max)
			}
		}
	})
}
