package engine

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// markSpy is a store.WaitMarker over a memstore that logs its marks and
// Reserves in the order they reach it.
type markSpy struct {
	store.Store

	mu   sync.Mutex
	log  []string
	fail error // MarkWaiting's answer when set
}

func (s *markSpy) MarkWaiting(_ context.Context, topics []string, life time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, "mark "+strings.Join(topics, ","))
	if life != markLife {
		s.log = append(s.log, "life "+life.String())
	}
	return s.fail
}

func (s *markSpy) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	s.mu.Lock()
	s.log = append(s.log, "reserve "+strings.Join(p.Topics, ","))
	s.mu.Unlock()
	return s.Store.Reserve(ctx, p)
}

func (s *markSpy) take() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.log
	s.log = nil
	return out
}

// TestWaiterMarksItsTopicsBeforeItsAttempt: over a store.WaitMarker a
// long-poll reserve marks its topics before its store attempt, so a job
// made ready elsewhere after the attempt is announced to it; a reserve
// without a wait marks nothing, a later waiter relies on a trusted mark
// without writing it again, and once the mark is too old the next
// waiter writes it again before its attempt.
func TestWaiterMarksItsTopicsBeforeItsAttempt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spy := &markSpy{Store: memstore.New()}
		e := New(spy, Config{})
		ctx := t.Context()
		reserve := func(wait time.Duration, topics ...string) {
			go func() { _, _ = e.Reserve(ctx, ReserveRequest{Topics: topics, Wait: wait}) }()
			synctest.Wait()
		}
		reserve(0, "a")
		if got := spy.take(); !slices.Equal(got, []string{"reserve a"}) {
			t.Fatalf("a reserve without a wait: %q, want only its attempt", got)
		}
		reserve(time.Minute, "a", "b")
		if got := spy.take(); !slices.Equal(got, []string{"mark a,b", "reserve a,b"}) {
			t.Fatalf("the first waiter of a and b: %q, want the mark of both, then the attempt", got)
		}
		reserve(time.Minute, "b")
		reserve(time.Minute, "b", "c")
		if got := spy.take(); !slices.Equal(got, []string{"reserve b", "mark c", "reserve b,c"}) {
			t.Fatalf("later waiters: %q, want b's trusted mark used and only c marked", got)
		}
		time.Sleep(markTrust) // no Run: nothing renews the marks
		reserve(time.Minute, "a")
		if got := spy.take(); !slices.Equal(got, []string{"mark a", "reserve a"}) {
			t.Fatalf("a waiter after %s: %q, want the mark written again before the attempt", markTrust, got)
		}
	})
}

// TestMarksRenewedWhileWaitersStay: Run rewrites the mark of a topic
// that still has a waiter before the mark stops being trusted, so a long
// wait keeps it live in the store, and stops once the waiter has gone.
func TestMarksRenewedWhileWaitersStay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		spy := &markSpy{Store: memstore.New()}
		e := New(spy, Config{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		const wait = 31 * time.Second
		start := time.Now()
		go func() { _, _ = e.Reserve(ctx, ReserveRequest{Topics: []string{"long"}, Wait: wait}) }()
		var marks []time.Duration // when each mark was written, from start
		last := time.Duration(0)
		for time.Since(start) < wait+markTrust {
			time.Sleep(time.Second)
			for _, l := range spy.take() {
				if l == "mark long" {
					marks = append(marks, time.Since(start))
				}
			}
			if time.Since(start) <= wait && len(marks) > 0 {
				if age := time.Since(start) - marks[len(marks)-1]; age >= markTrust {
					t.Fatalf("at %s the waiter's mark is %s old, want it renewed before %s (marks at %v)", time.Since(start), age, markTrust, marks)
				}
			}
			if len(marks) > 0 {
				last = marks[len(marks)-1]
			}
		}
		if len(marks) < int(wait/markRenew) {
			t.Errorf("marks written at %v during a wait of %s, want one every %s", marks, wait, markRenew)
		}
		if last > wait+markRenew {
			t.Errorf("a mark written at %s, after the waiter left at %s", last, wait)
		}
		e.marks.mu.Lock()
		kept := len(e.marks.m)
		e.marks.mu.Unlock()
		if kept != 0 {
			t.Errorf("%d topics still remembered as marked %s after their last waiter left, want none", kept, markTrust)
		}
		cancel()
		<-done
	})
}

// TestFailedMarkStillServes: a mark the store cannot write does not
// fail the reserve: its attempt still runs and a job ready here is
// served.
func TestFailedMarkStillServes(t *testing.T) {
	spy := &markSpy{Store: memstore.New(), fail: errors.New("store down")}
	e := New(spy, Config{})
	putReady(t, e, "f", 1, 0)
	jobs, err := e.Reserve(t.Context(), ReserveRequest{Topics: []string{"f"}, Wait: time.Minute})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v; want the ready job", jobs, err)
	}
	if got := spy.take(); !slices.Equal(got, []string{"mark f", "reserve f"}) {
		t.Errorf("%q, want the failed mark, then the attempt", got)
	}
}
