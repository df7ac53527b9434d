package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// retaining returns an engine over a memstore that keeps removed jobs
// for an hour.
func retaining(t *testing.T) *Engine {
	t.Helper()
	return New(memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour, Bodies: true}}), Config{})
}

// TestAttemptsNameWhoReserved checks that the engine hands the store who
// reserves (ReserveRequest.By, ReserveJob's by) and when a job ended
// (DeleteParams.Now), so a finished job reads back with both.
func TestAttemptsNameWhoReserved(t *testing.T) {
	e := retaining(t)
	ctx := context.Background()
	if _, err := e.Put(ctx, []PutRequest{{ID: "a", Topic: "t"}, {ID: "b", Topic: "u", Delay: ptr(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, By: "alice"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve(t) = %v, %v", jobs, err)
	}
	before := time.Now()
	if _, err := e.Finish(ctx, delayq.Ref{ID: "a", Reservation: jobs[0].Reservation}); err != nil {
		t.Fatal(err)
	}
	a, err := e.Get(ctx, delayq.Ref{ID: "a"})
	if err != nil {
		t.Fatalf("Get(a) after finish = %v, want the retained job", err)
	}
	if a.State != delayq.StateFinished || len(a.History) != 1 || a.History[0].By != "alice" || a.History[0].Outcome != delayq.OutcomeFinished {
		t.Errorf("Get(a) after finish = state %s, history %+v; want finished, one attempt by alice that finished", a.State, a.History)
	}
	if a.Ended.Before(before.Truncate(time.Millisecond)) || a.Ended.After(time.Now()) {
		t.Errorf("Get(a).Ended = %s, want the finish's time (after %s)", a.Ended, before)
	}
	b, err := e.ReserveJob(ctx, delayq.Ref{ID: "b"}, "beanstalk 127.0.0.1:5555")
	if err != nil {
		t.Fatal(err)
	}
	if len(b.History) != 1 || b.History[0].By != "beanstalk 127.0.0.1:5555" {
		t.Errorf("ReserveJob(b).History = %+v, want one attempt by the connection", b.History)
	}
}

// TestPutOfTakenIDSaysState checks the idempotency window at the engine:
// a put of a finished job's id is refused as ErrExists with the state
// in the error and its message, and so is a put of a live id, even over a
// store that does not say the state (the engine reads it).
func TestPutOfTakenIDSaysState(t *testing.T) {
	for _, says := range []bool{true, false} {
		t.Run(fmt.Sprintf("store says the state: %v", says), func(t *testing.T) {
			var st store.Store = memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour}})
			if !says {
				st = &mute{st}
			}
			e := New(st, Config{})
			ctx := context.Background()
			if _, err := e.Put(ctx, []PutRequest{{ID: "done", Topic: "t"}, {ID: "live", Topic: "t", Delay: ptr(time.Hour)}}); err != nil {
				t.Fatal(err)
			}
			jobs, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}})
			if err != nil || len(jobs) != 1 {
				t.Fatalf("Reserve(t) = %v, %v", jobs, err)
			}
			if _, err := e.Finish(ctx, delayq.Ref{ID: "done", Reservation: jobs[0].Reservation}); err != nil {
				t.Fatal(err)
			}
			for id, state := range map[string]delayq.State{"done": delayq.StateFinished, "live": delayq.StateDelayed} {
				_, err := e.Put(ctx, []PutRequest{{ID: "other", Topic: "t"}, {ID: id, Topic: "t"}})
				var ee *delayq.ExistsError
				if !errors.Is(err, delayq.ErrExists) || !errors.As(err, &ee) || ee.ID != id || ee.State != state {
					t.Errorf("Put(other, %s) = %v (%+v), want an ExistsError for %s in state %s", id, err, ee, id, state)
				}
				if want := fmt.Sprintf("job %q already exists (%s)", id, state); delayq.Message(err) != want {
					t.Errorf("Put(other, %s) says %q, want %q", id, delayq.Message(err), want)
				}
			}
			if _, err := e.Get(ctx, delayq.Ref{ID: "other"}); !errors.Is(err, delayq.ErrNotFound) {
				t.Errorf("Get(other) after the refused puts = %v, want not found", err)
			}
		})
	}
}

// mute is a store that refuses a taken id without saying its state, as
// a store may (store.Store.Put).
type mute struct{ store.Store }

func (m *mute) Put(ctx context.Context, jobs []*delayq.Job) error {
	if err := m.Store.Put(ctx, jobs); err != nil {
		if errors.Is(err, delayq.ErrExists) {
			return fmt.Errorf("mute: put: %w", delayq.ErrExists)
		}
		return err
	}
	return nil
}

// TestFinishByID checks the original protocol's finish by id alone: a
// reserved job is kept as finished (its attempt too), one never handed
// out as deleted.
func TestFinishByID(t *testing.T) {
	e := retaining(t)
	ctx := context.Background()
	if _, err := e.Put(ctx, []PutRequest{{ID: "a", Topic: "t"}, {ID: "b", Topic: "u"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, By: "json 1.2.3.4:5"}); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]delayq.State{"a": delayq.StateFinished, "b": delayq.StateDeleted} {
		if _, err := e.FinishByID(ctx, id); err != nil {
			t.Fatalf("FinishByID(%s) = %v", id, err)
		}
		j, err := e.Get(ctx, delayq.Ref{ID: id})
		if err != nil || j.State != want {
			t.Errorf("Get(%s) after FinishByID = %v, %v; want state %s", id, j, err, want)
		}
	}
	a, _ := e.Get(ctx, delayq.Ref{ID: "a"})
	if a == nil || len(a.History) != 1 || a.History[0].Outcome != delayq.OutcomeFinished {
		t.Errorf("Get(a).History after FinishByID = %+v, want its attempt finished", a)
	}
	if _, err := e.FinishByID(ctx, "a"); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("FinishByID(a) again = %v, want not found", err)
	}
}

// TestFinishIsIdempotent checks that a finish sent again after its answer
// was lost succeeds while the job is retained as finished by that very
// reservation, answering the job as it now is (finished), as the first
// finish's answer does; a forged tag, another attempt's reservation, a
// batch finish sent again, and a server that retains nothing, each as
// documented.
func TestFinishIsIdempotent(t *testing.T) {
	e := retaining(t)
	ctx := context.Background()
	if _, err := e.Put(ctx, []PutRequest{{ID: "a", Topic: "t"}, {ID: "b", Topic: "t"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, N: 2})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Reserve(t) = %v, %v", jobs, err)
	}
	ref := delayq.Ref{ID: "a", Reservation: jobs[0].Reservation}
	first, err := e.Finish(ctx, ref)
	if err != nil || first.State != delayq.StateFinished || first.Reservation != "" || first.Ended.IsZero() {
		t.Fatalf("Finish(a) = %+v, %v; want the job as it now is: finished, ended, no reservation", first, err)
	}
	again, err := e.Finish(ctx, ref)
	if err != nil || again.State != delayq.StateFinished || again.ID != "a" || !again.Ended.Equal(first.Ended) {
		t.Errorf("Finish(a) sent again = %+v, %v; want success with the finished job", again, err)
	}
	forged := ref
	forged.Reservation = ref.Reservation[:len(ref.Reservation)-1] + "0"
	if forged.Reservation == ref.Reservation {
		forged.Reservation = ref.Reservation[:len(ref.Reservation)-1] + "1"
	}
	if _, err := e.Finish(ctx, forged); !errors.Is(err, delayq.ErrNotFound) && !errors.Is(err, delayq.ErrNotReserved) {
		t.Errorf("Finish(a) again with a forged tag = %v, want not_found or not_reserved", err)
	}
	// b: its first attempt's reservation is stale once b is reserved again
	// and finished under the second.
	stale := delayq.Ref{ID: "b", Reservation: jobs[1].Reservation}
	if _, err := e.Release(ctx, ReleaseRequest{Ref: stale}); err != nil {
		t.Fatal(err)
	}
	re, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}})
	if err != nil || len(re) != 1 {
		t.Fatalf("Reserve(t) again = %v, %v", re, err)
	}
	errs, err := e.FinishBatch(ctx, []delayq.Ref{{ID: "b", Reservation: re[0].Reservation}})
	if err != nil || errs[0] != nil {
		t.Fatalf("FinishBatch(b) = %v, %v", errs, err)
	}
	errs, err = e.FinishBatch(ctx, []delayq.Ref{{ID: "b", Reservation: re[0].Reservation}, ref})
	if err != nil || errs[0] != nil || errs[1] != nil {
		t.Errorf("FinishBatch(b, a) sent again = %v, %v; want both finished", errs, err)
	}
	if _, err := e.Finish(ctx, stale); err == nil {
		t.Errorf("Finish(b) with its first attempt's reservation succeeded; want a refusal")
	}

	// Retaining nothing, a second finish can only say not_found.
	bare := New(memstore.New(), Config{})
	if _, err := bare.Put(ctx, []PutRequest{{ID: "a", Topic: "t"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err = bare.Reserve(ctx, ReserveRequest{Topics: []string{"t"}})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	ref = delayq.Ref{ID: "a", Reservation: jobs[0].Reservation}
	if j, err := bare.Finish(ctx, ref); err != nil || j.State != delayq.StateFinished {
		t.Errorf("Finish without retention = %+v, %v; want finished", j, err)
	}
	if _, err := bare.Finish(ctx, ref); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Finish sent again without retention = %v, want not_found", err)
	}
}
