package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// reserveSpy counts store Reserves, and holds the ones of gated topics
// until the gate opens.
type reserveSpy struct {
	store.Store

	mu    sync.Mutex
	calls int
	gated []string      // Reserves naming exactly these topics wait for gate
	gate  chan struct{} // closed to let them through
}

func (s *reserveSpy) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	s.mu.Lock()
	s.calls++
	gate := s.gate
	if !slices.Equal(p.Topics, s.gated) {
		gate = nil
	}
	s.mu.Unlock()
	if gate != nil {
		<-gate
	}
	return s.Store.Reserve(ctx, p)
}

func (s *reserveSpy) reserves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

func startSpied(t *testing.T) (*Engine, *reserveSpy) {
	t.Helper()
	spy := &reserveSpy{Store: memstore.New()}
	e := New(spy, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, spy
}

func putReady(t *testing.T, e *Engine, topic string, n int, prio uint32) {
	t.Helper()
	reqs := make([]PutRequest, n)
	for i := range reqs {
		reqs[i] = PutRequest{Topic: topic, Priority: &prio}
	}
	if _, err := e.Put(context.Background(), reqs); err != nil {
		t.Fatalf("Put = %v", err)
	}
}

// TestReadyJobsWakeWaitersByTheirTake: jobs made ready together wake
// as many waiters as their takes need, not one per job. Ten jobs and
// four waiters that take up to sixteen each: one waiter wakes and takes
// all ten, the other three stay parked and never reach the store (one
// wake-up per job woke all four, and three ran an empty reserve).
func TestReadyJobsWakeWaitersByTheirTake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, spy := startSpied(t)
		const waiting = 4
		got := make(chan int, waiting)
		for range waiting {
			go func() {
				jobs, err := e.Reserve(context.Background(), ReserveRequest{Topics: []string{"t"}, N: 16, Wait: time.Minute})
				if err != nil {
					t.Errorf("Reserve = %v", err)
				}
				got <- len(jobs)
			}()
		}
		synctest.Wait()
		if w := e.Waiting("t"); w != waiting {
			t.Fatalf("Waiting = %d, want %d", w, waiting)
		}
		before := spy.reserves()
		putReady(t, e, "t", 10, delayq.DefaultPriority)
		synctest.Wait()
		if n := <-got; n != 10 {
			t.Errorf("the woken waiter took %d jobs, want all 10", n)
		}
		if w := e.Waiting("t"); w != waiting-1 {
			t.Errorf("Waiting = %d after the put, want %d: one waiter takes the ten jobs", w, waiting-1)
		}
		if n := spy.reserves() - before; n != 1 {
			t.Errorf("the put of ten jobs cost %d store reserves, want 1", n)
		}
		// 40 jobs need three takes of 16.
		putReady(t, e, "t", 40, delayq.DefaultPriority)
		synctest.Wait()
		total := 0
		for range waiting - 1 {
			total += <-got
		}
		if total != 40 {
			t.Errorf("the other waiters took %d jobs, want 40", total)
		}
	})
}

// TestWaitingReserveTriesTheStoreOnce: a long-polling reserve on an empty
// topic asks the store once before it parks, not once before parking and
// once more after (an empty store transaction more for every consumer
// that comes back for more).
func TestWaitingReserveTriesTheStoreOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, spy := startSpied(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			if jobs, err := e.Reserve(context.Background(), ReserveRequest{Topics: []string{"t"}, Wait: time.Minute}); err != nil || len(jobs) != 0 {
				t.Errorf("Reserve on an empty topic = %d jobs, %v; want none", len(jobs), err)
			}
		}()
		synctest.Wait()
		if e.Waiting("t") != 1 {
			t.Fatalf("Waiting = %d, want the reserve parked", e.Waiting("t"))
		}
		if n := spy.reserves(); n != 1 {
			t.Errorf("a waiting reserve asked the store %d times before parking, want 1", n)
		}
		<-done
	})
}

// TestFullReserveHandsOnItsWake: a waiter woken for jobs of one topic
// that fills its take with jobs of another passes the wake-up on, so the
// jobs it was counted on for reach another waiter instead of staying
// ready while that one sleeps out its wait.
func TestFullReserveHandsOnItsWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e, spy := startSpied(t)
		type result struct {
			jobs []*delayq.Job
			at   time.Duration
		}
		begin := time.Now()
		reserve := func(topics ...string) chan result {
			ch := make(chan result, 1)
			go func() {
				jobs, err := e.Reserve(context.Background(), ReserveRequest{Topics: topics, N: 2, Wait: time.Minute})
				if err != nil {
					t.Errorf("Reserve(%v) = %v", topics, err)
				}
				ch <- result{jobs, time.Since(begin)}
			}()
			return ch
		}
		both := reserve("a", "b") // parks first: the oldest waiter of b
		synctest.Wait()
		onlyB := reserve("b")
		synctest.Wait()
		spy.mu.Lock()
		spy.gated, spy.gate = []string{"a", "b"}, make(chan struct{})
		gate := spy.gate
		spy.mu.Unlock()
		putReady(t, e, "b", 2, delayq.DefaultPriority) // wakes the waiter of a and b, for both jobs
		synctest.Wait()                                // which is held at the store
		putReady(t, e, "a", 2, 0)                      // more urgent: it will take these instead
		close(gate)
		r := <-both
		if len(r.jobs) != 2 || r.jobs[0].Topic != "a" || r.jobs[1].Topic != "a" {
			t.Fatalf("the waiter of a and b got %v, want the two urgent jobs of a", r.jobs)
		}
		r = <-onlyB
		if len(r.jobs) != 2 {
			t.Fatalf("the waiter of b got %d jobs after %s, want the two of b at once", len(r.jobs), r.at)
		}
		if r.at != 0 {
			t.Errorf("the waiter of b got its jobs after %s, want at once", r.at)
		}
	})
}
