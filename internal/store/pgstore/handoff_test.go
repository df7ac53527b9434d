package pgstore

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
)

// watchedStore is the real store with its Reserve calls counted and a
// hook that runs once a Tick has claimed waiting reserves.
type watchedStore struct {
	*Store
	reserves atomic.Int32
	claimed  atomic.Pointer[func()] // run once (on the timer's goroutine) after a Claim that named reserves
}

func (w *watchedStore) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	defer w.reserves.Add(1)
	return w.Store.Reserve(ctx, p)
}

func (w *watchedStore) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	if claim := p.Claim; claim != nil {
		p.Claim = func(ready map[string]int) []store.Take {
			takes := claim(ready)
			if len(takes) > 0 {
				if hook := w.claimed.Swap(nil); hook != nil {
					(*hook)()
				}
			}
			return takes
		}
	}
	return w.Store.Tick(ctx, p)
}

// handOffEngine runs an engine over a watched store of its own.
func handOffEngine(t *testing.T) (*engine.Engine, *watchedStore) {
	t.Helper()
	ws := &watchedStore{Store: openStore(t, Options{})}
	e := engine.New(ws, engine.Config{Logger: quiet()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; ws.Close() })
	return e, ws
}

type reserved struct {
	jobs []*delayq.Job
	err  error
}

// waitingReserve starts a long-polling reserve of one job of "orders"
// and returns once it has tried the store and parked.
func waitingReserve(ctx context.Context, t *testing.T, e *engine.Engine, ws *watchedStore) <-chan reserved {
	t.Helper()
	out := make(chan reserved, 1)
	go func() {
		jobs, err := e.Reserve(ctx, engine.ReserveRequest{Topics: []string{"orders"}, N: 1, Wait: time.Minute, By: "tester"})
		out <- reserved{jobs, err}
	}()
	// The waiter parks before its one store attempt, so once that
	// attempt has returned it waits.
	waitFor(t, "the reserve's store attempt", func() bool { return ws.reserves.Load() >= 1 })
	return out
}

func putIn(t *testing.T, e *engine.Engine, d time.Duration) *delayq.Job {
	t.Helper()
	jobs, err := e.Put(t.Context(), []engine.PutRequest{{Topic: "orders", Body: []byte("close #1"), Delay: &d}})
	if err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// TestWaitingReserveTakesItsJobFromTheTick: a job that falls due while a
// consumer waits reaches it reserved in the timer's own transaction;
// the consumer runs no store reserve of its own after its first, empty
// one.
func TestWaitingReserveTakesItsJobFromTheTick(t *testing.T) {
	e, ws := handOffEngine(t)
	got := waitingReserve(t.Context(), t, e, ws)
	put := putIn(t, e, 50*time.Millisecond)
	r := <-got
	if r.err != nil || len(r.jobs) != 1 || r.jobs[0].ID != put.ID {
		t.Fatalf("reserve = %v, %v; want job %s", r.jobs, r.err, put.ID)
	}
	if n := ws.reserves.Load(); n != 1 {
		t.Errorf("store reserves = %d, want 1 (the empty one before the wait): the tick hands the job over", n)
	}
	j, err := ws.Get(t.Context(), delayq.Ref{ID: put.ID})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != delayq.StateReserved || j.Attempts != 1 || len(j.History) != 1 || j.History[0].By != "tester" {
		t.Errorf("stored job: state %s, attempts %d, history %+v; want reserved, 1, one attempt by tester", j.State, j.Attempts, j.History)
	}
	if _, err := e.Finish(t.Context(), delayq.Ref{ID: put.ID, Reservation: r.jobs[0].Reservation}); err != nil {
		t.Errorf("finishing the handed job with its reservation = %v", err)
	}
}

// TestHandedJobOfAGoneReserveGoesBack: a consumer that leaves after the
// timer claimed it, before the hand-off, costs its job nothing: the job
// goes back to ready with its attempt taken back, for the next consumer.
func TestHandedJobOfAGoneReserveGoesBack(t *testing.T) {
	e, ws := handOffEngine(t)
	ctx, cancel := context.WithCancel(t.Context())
	got := waitingReserve(ctx, t, e, ws)
	leftCh := make(chan reserved, 1)
	hook := func() {
		cancel()
		leftCh <- <-got
	}
	ws.claimed.Store(&hook)
	put := putIn(t, e, 50*time.Millisecond)
	waitFor(t, "the hand-off's tick", func() bool {
		j, err := ws.Get(t.Context(), delayq.Ref{ID: put.ID})
		return err == nil && j.State == delayq.StateReady
	})
	left := <-leftCh
	if !errors.Is(left.err, context.Canceled) || len(left.jobs) != 0 {
		t.Errorf("the leaving reserve = %v, %v; want no jobs, context.Canceled", left.jobs, left.err)
	}
	j, err := ws.Get(t.Context(), delayq.Ref{ID: put.ID})
	if err != nil {
		t.Fatal(err)
	}
	if j.Attempts != 0 {
		t.Errorf("attempts after the give-back = %d, want 0", j.Attempts)
	}
	jobs, err := e.Reserve(t.Context(), engine.ReserveRequest{Topics: []string{"orders"}, N: 1})
	if err != nil || len(jobs) != 1 || jobs[0].ID != put.ID {
		t.Errorf("next reserve = %v, %v; want job %s", jobs, err, put.ID)
	}
}
