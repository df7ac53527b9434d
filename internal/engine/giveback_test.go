package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// TestTTRRunsFromTheReserveInstant reserves in the middle of a
// millisecond: the job must not go to a second consumer before the
// reserve's exact instant plus TTR. Deadlines rounded down handed it out
// up to a millisecond early.
func TestTTRRunsFromTheReserveInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		const ttr = 5 * time.Second
		h.put(PutRequest{ID: "a", TTR: ptr(ttr)})
		time.Sleep(300 * time.Microsecond) // the bubble's clock starts on a millisecond
		reserved := time.Now()
		first := h.reserve(0, "t")
		if len(first) != 1 {
			t.Fatalf("Reserve = %v, want job a", first)
		}
		if first[0].Deadline.Before(reserved.Add(ttr)) {
			t.Errorf("Deadline = %s, before the reserve instant + TTR = %s", first[0].Deadline.Format(time.StampMicro), reserved.Add(ttr).Format(time.StampMicro))
		}
		again := h.reserve(time.Minute, "t")
		if len(again) != 1 {
			t.Fatalf("Reserve after the TTR = %v, want job a again", again)
		}
		if handed := time.Since(reserved); handed < ttr {
			t.Errorf("job went to a second consumer %s after the first reserved it, before its TTR of %s", handed, ttr)
		}
	})
}

// TestTTRRunsFromTheTouchInstant is the same for a touch mid-millisecond.
func TestTTRRunsFromTheTouchInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		const ttr = 5 * time.Second
		h.put(PutRequest{ID: "a", TTR: ptr(ttr)})
		j := h.reserve(0, "t")[0]
		time.Sleep(2*time.Second + 700*time.Microsecond)
		touched := time.Now()
		if _, err := h.e.Touch(context.Background(), delayq.Ref{ID: "a", Reservation: j.Reservation}); err != nil {
			t.Fatalf("Touch = %v", err)
		}
		if again := h.reserve(time.Minute, "t"); len(again) != 1 {
			t.Fatalf("Reserve after the touched TTR = %v, want job a again", again)
		}
		if handed := time.Since(touched); handed < ttr {
			t.Errorf("job went to a second consumer %s after the touch, before its TTR of %s", handed, ttr)
		}
	})
}

// hangUpStore is a memstore whose Reserve, once it has reserved jobs, runs
// hangUp: a consumer that goes away just after the store reserved its job
// and before the engine hands it over, the window real hang-ups hit.
type hangUpStore struct {
	*memstore.Store
	hangUp func()
}

func (s *hangUpStore) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	jobs, err := s.Store.Reserve(ctx, p)
	if len(jobs) > 0 && s.hangUp != nil {
		s.hangUp()
	}
	return jobs, err
}

// TestHungUpReserveCostsNoAttempt: a job reserved for a consumer that went
// away goes back ready with its attempt taken back. Given back through
// Release, a max_attempts=1 job was buried without reaching anyone.
func TestHungUpReserveCostsNoAttempt(t *testing.T) {
	for _, wait := range []time.Duration{0, time.Minute} {
		t.Run("wait "+wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := &hangUpStore{Store: memstore.New()}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				h := startOn(t, st, Config{})
				done := make(chan error)
				reserve := func() {
					jobs, err := h.e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, Wait: wait})
					if len(jobs) > 0 {
						err = errors.New("the job reached a consumer that had gone")
					}
					done <- err
				}
				st.hangUp = cancel
				if wait > 0 {
					go reserve()
					synctest.Wait() // the long-poll waits
					h.put(PutRequest{ID: "a", MaxAttempts: ptr(1)})
				} else {
					h.put(PutRequest{ID: "a", MaxAttempts: ptr(1)})
					go reserve()
				}
				if err := <-done; !errors.Is(err, context.Canceled) {
					t.Fatalf("Reserve of a consumer that hung up = %v, want context.Canceled", err)
				}
				synctest.Wait()
				st.hangUp = nil
				j, err := h.e.Get(context.Background(), delayq.Ref{ID: "a"})
				if err != nil || j.State != delayq.StateReady || j.Attempts != 0 || j.Releases != 0 || j.Buries != 0 || j.Reservation != "" {
					t.Fatalf("job after its consumer hung up = %+v, %v; want ready, attempts 0, no release, no bury", j, err)
				}
				got := h.reserve(0, "t")
				if len(got) != 1 || got[0].ID != "a" || got[0].Attempts != 1 {
					t.Fatalf("next consumer's Reserve = %v, want job a on its first attempt", got)
				}
			})
		})
	}
}

// startOn is start over a store of the test's own.
func startOn(t *testing.T, st store.Store, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, e: New(st, cfg), cancel: cancel, done: make(chan struct{})}
	go func() { defer close(h.done); _ = h.e.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}
