package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/uuid"
	"go.uber.org/goleak"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// harness runs an engine with its timer inside a synctest bubble, so
// time.Now and timers are fake and tests need no sleeps.
type harness struct {
	t      *testing.T
	e      *Engine
	cancel context.CancelFunc
	done   chan struct{}
}

func start(t *testing.T, cfg Config) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	h := &harness{t: t, e: New(memstore.New(), cfg), cancel: cancel, done: make(chan struct{})}
	go func() { defer close(h.done); _ = h.e.Run(ctx) }()
	t.Cleanup(h.stop)
	return h
}

func (h *harness) stop() {
	h.cancel()
	<-h.done
}

func (h *harness) put(r PutRequest) *delayq.Job {
	h.t.Helper()
	if r.Topic == "" {
		r.Topic = "t"
	}
	jobs, err := h.e.Put(context.Background(), []PutRequest{r})
	if err != nil {
		h.t.Fatalf("Put(%+v) = %v", r, err)
	}
	return jobs[0]
}

func (h *harness) reserve(wait time.Duration, topics ...string) []*delayq.Job {
	h.t.Helper()
	jobs, err := h.e.Reserve(context.Background(), ReserveRequest{Topics: topics, Wait: wait})
	if err != nil {
		h.t.Fatalf("Reserve(%v, wait %s) = %v", topics, wait, err)
	}
	return jobs
}

func TestTimerFiresExactlyAtDue(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		begin := time.Now()
		j := h.put(PutRequest{ID: "a", Delay: ptr(10 * time.Second)})
		time.Sleep(10*time.Second - time.Millisecond)
		if got := h.reserve(0, "t"); len(got) != 0 {
			t.Fatalf("job handed out %s before its due time", time.Millisecond)
		}
		got := h.reserve(time.Minute, "t")
		if len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("Reserve = %v, want job a", got)
		}
		if waited := time.Since(begin); waited != 10*time.Second {
			t.Errorf("job reserved after %s, want exactly 10s", waited)
		}
	})
}

func TestEarlierPutWakesSleepingTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		h.put(PutRequest{ID: "late", Delay: ptr(time.Hour)})
		synctest.Wait() // the timer now sleeps towards the 1h job
		begin := time.Now()
		h.put(PutRequest{ID: "early", Delay: ptr(2 * time.Second)})
		got := h.reserve(time.Minute, "t")
		if len(got) != 1 || got[0].ID != "early" {
			t.Fatalf("Reserve = %v, want job early", got)
		}
		if waited := time.Since(begin); waited != 2*time.Second {
			t.Errorf("early job reserved after %s, want 2s", waited)
		}
	})
}

func TestOneReadyJobWakesOneWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		const n = 5
		var mu sync.Mutex
		got := 0
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if jobs := h.reserve(time.Minute, "t"); len(jobs) == 1 {
					mu.Lock()
					got++
					mu.Unlock()
				}
			})
		}
		synctest.Wait()
		if w := h.e.Waiting("t"); w != n {
			t.Fatalf("Waiting = %d, want %d", w, n)
		}
		h.put(PutRequest{})
		synctest.Wait()
		mu.Lock()
		if got != 1 {
			t.Errorf("after one put %d waiters got a job, want 1", got)
		}
		mu.Unlock()
		if w := h.e.Waiting("t"); w != n-1 {
			t.Errorf("Waiting = %d after one put, want %d", w, n-1)
		}
		h.e.waiters.mu.Lock()
		if woken := h.e.waiters.woken; woken != 1 {
			t.Errorf("one put woke %d waiters, want 1 (no thundering herd)", woken)
		}
		h.e.waiters.mu.Unlock()
		for range n - 1 {
			h.put(PutRequest{})
		}
		wg.Wait()
		if got != n {
			t.Errorf("%d waiters got a job, want %d", got, n)
		}
	})
}

func TestWaiterOnSeveralTopics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		res := make(chan []*delayq.Job)
		go func() { res <- h.reserve(time.Minute, "a", "b") }()
		synctest.Wait()
		h.put(PutRequest{Topic: "b", ID: "x"})
		if got := <-res; len(got) != 1 || got[0].ID != "x" {
			t.Fatalf("Reserve(a, b) = %v, want job x", got)
		}
		if h.e.Waiting("a") != 0 || h.e.Waiting("b") != 0 {
			t.Errorf("a woken waiter is still parked: a=%d b=%d", h.e.Waiting("a"), h.e.Waiting("b"))
		}
	})
}

func TestWaitRunsOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		begin := time.Now()
		if got := h.reserve(30*time.Second, "t"); len(got) != 0 {
			t.Fatalf("Reserve on an empty topic = %v, want none", got)
		}
		if waited := time.Since(begin); waited != 30*time.Second {
			t.Errorf("reserve returned after %s, want the full 30s wait", waited)
		}
	})
}

func TestTTRExpiryHandsJobOutAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		h.put(PutRequest{ID: "a", TTR: ptr(5 * time.Second)})
		first := h.reserve(0, "t")[0]
		begin := time.Now()
		again := h.reserve(time.Minute, "t")
		if len(again) != 1 || again[0].Attempts != 2 {
			t.Fatalf("Reserve after TTR = %v, want job a on attempt 2", again)
		}
		if waited := time.Since(begin); waited != 5*time.Second {
			t.Errorf("job handed out again after %s, want at its TTR of 5s", waited)
		}
		_, err := h.e.Finish(context.Background(), delayq.Ref{ID: "a", Reservation: first.Reservation})
		if !errors.Is(err, delayq.ErrNotReserved) {
			t.Errorf("Finish with the stale reservation = %v, want ErrNotReserved", err)
		}
		if _, err := h.e.Finish(context.Background(), delayq.Ref{ID: "a", Reservation: again[0].Reservation}); err != nil {
			t.Errorf("Finish by the holder = %v", err)
		}
	})
}

func TestTouchExtendsTTR(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		h.put(PutRequest{ID: "a", TTR: ptr(5 * time.Second)})
		j := h.reserve(0, "t")[0]
		time.Sleep(4 * time.Second)
		if _, err := h.e.Touch(context.Background(), delayq.Ref{ID: "a", Reservation: j.Reservation}); err != nil {
			t.Fatalf("Touch = %v", err)
		}
		if got := h.reserve(4*time.Second+999*time.Millisecond, "t"); len(got) != 0 {
			t.Fatalf("job handed out before its touched deadline")
		}
		if got := h.reserve(time.Second, "t"); len(got) != 1 {
			t.Fatalf("job not handed out at its touched deadline")
		}
	})
}

func TestSpentAttemptsBury(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		h.put(PutRequest{ID: "a", TTR: ptr(time.Second), MaxAttempts: ptr(2)})
		h.reserve(0, "t")
		if got := h.reserve(time.Minute, "t"); len(got) != 1 {
			t.Fatalf("second attempt not handed out")
		}
		if got := h.reserve(time.Minute, "t"); len(got) != 0 {
			t.Fatalf("third attempt handed out, want the job buried after 2")
		}
		j, err := h.e.Get(context.Background(), delayq.Ref{ID: "a"})
		if err != nil || j.State != delayq.StateBuried {
			t.Fatalf("Get = %v, %v; want buried", j, err)
		}
	})
}

func TestReleaseWithDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		h.put(PutRequest{ID: "a"})
		j := h.reserve(0, "t")[0]
		got, err := h.e.Release(context.Background(), ReleaseRequest{Ref: delayq.Ref{ID: "a", Reservation: j.Reservation}, Delay: 3 * time.Second})
		if err != nil || got.State != delayq.StateDelayed {
			t.Fatalf("Release = %v, %v; want delayed", got, err)
		}
		begin := time.Now()
		if r := h.reserve(time.Minute, "t"); len(r) != 1 {
			t.Fatal("released job never came back")
		}
		if waited := time.Since(begin); waited != 3*time.Second {
			t.Errorf("released job came back after %s, want 3s", waited)
		}
	})
}

func TestDrainEndsLongPolls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		res := make(chan int)
		go func() { res <- len(h.reserve(time.Minute, "t")) }()
		synctest.Wait()
		begin := time.Now()
		h.e.Drain()
		if n := <-res; n != 0 {
			t.Errorf("drained reserve got %d jobs", n)
		}
		if time.Since(begin) != 0 {
			t.Errorf("drain took %s to end a long-poll", time.Since(begin))
		}
		if _, err := h.e.Put(context.Background(), []PutRequest{{Topic: "t", TTR: ptr(time.Second)}}); !errors.Is(err, delayq.ErrDraining) {
			t.Errorf("Put while draining = %v, want ErrDraining", err)
		}
	})
}

func TestCanceledReserveLosesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() {
			_, err := h.e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, Wait: time.Minute})
			done <- err
		}()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("canceled Reserve = %v, want context.Canceled", err)
		}
		h.put(PutRequest{ID: "a"})
		if got := h.reserve(0, "t"); len(got) != 1 {
			t.Errorf("job put after a canceled wait is not ready: %v", got)
		}
	})
}

func TestPausedTopicWakesWaitersWhenPauseEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		if err := h.e.Pause(context.Background(), "t", 5*time.Second); err != nil {
			t.Fatal(err)
		}
		h.put(PutRequest{ID: "a"})
		begin := time.Now()
		if got := h.reserve(time.Minute, "t"); len(got) != 1 {
			t.Fatal("job never handed out after the pause")
		}
		if waited := time.Since(begin); waited != 5*time.Second {
			t.Errorf("job handed out after %s, want when the 5s pause ends", waited)
		}
	})
}

func TestPutValidation(t *testing.T) {
	e := New(memstore.New(), Config{MaxBody: 10})
	ok := PutRequest{Topic: "t", TTR: ptr(time.Second)}
	tests := []struct {
		name string
		edit func(*PutRequest)
		code string
	}{
		{"bad topic", func(r *PutRequest) { r.Topic = "-x" }, "bad_topic"},
		{"empty topic", func(r *PutRequest) { r.Topic = "" }, "bad_topic"},
		{"bad id", func(r *PutRequest) { r.ID = "a b" }, "bad_id"},
		{"body too big", func(r *PutRequest) { r.Body = make([]byte, 11) }, "body_too_big"},
		{"negative delay", func(r *PutRequest) { r.Delay = ptr(-time.Second) }, "bad_delay"},
		{"delay and at", func(r *PutRequest) { r.Delay, r.At = ptr(time.Second), ptr(time.Now()) }, "bad_delay"},
		{"at in year 0", func(r *PutRequest) { r.At = ptr(time.Time{}) }, "bad_at"},
		{"at before 1970", func(r *PutRequest) { r.At = ptr(time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)) }, "bad_at"},
		{"ttr zero", func(r *PutRequest) { r.TTR = ptr(time.Duration(0)) }, "bad_ttr"},
		{"ttr too long", func(r *PutRequest) { r.TTR = ptr(MaxTTR + time.Second) }, "bad_ttr"},
		{"negative attempts", func(r *PutRequest) { r.MaxAttempts = ptr(-1) }, "bad_max_attempts"},
		{"at after 9999", func(r *PutRequest) { r.At = ptr(time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)) }, "bad_at"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.edit(&r)
			_, err := e.Put(context.Background(), []PutRequest{r})
			var ve *delayq.ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code {
				t.Fatalf("Put(%s) = %v, want code %s", tc.name, err, tc.code)
			}
		})
	}
	if ts, _ := e.Topics(context.Background()); len(ts) != 0 {
		t.Errorf("refused puts changed the store: %v", ts)
	}
	big := make([]PutRequest, delayq.MaxBatch+1)
	if _, err := e.Put(context.Background(), big); !errors.Is(err, delayq.ErrInvalid) {
		t.Errorf("Put of %d jobs = %v, want ErrInvalid", len(big), err)
	}
}

func TestPutGeneratesIDAndRoundsDueUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		time.Sleep(500 * time.Microsecond) // now is mid-millisecond
		j := h.put(PutRequest{Delay: ptr(1500 * time.Microsecond)})
		if !delayq.ValidID(j.ID) {
			t.Errorf("generated id %q is not a valid id", j.ID)
		}
		if want := delayq.CeilMilli(time.Now().Add(1500 * time.Microsecond)); !j.Due.Equal(want) {
			t.Errorf("Due = %s, want %s (rounded up to the ms)", j.Due, want)
		}
	})
}

func TestReserveValidation(t *testing.T) {
	e := New(memstore.New(), Config{MaxWait: time.Minute, MaxReserveTopics: 2})
	tests := []struct {
		name string
		r    ReserveRequest
		code string
	}{
		{"no topics", ReserveRequest{}, "bad_topics"},
		{"too many topics", ReserveRequest{Topics: []string{"a", "b", "c"}}, "too_many_topics"},
		{"bad topic", ReserveRequest{Topics: []string{"a b"}}, "bad_topic"},
		{"n too big", ReserveRequest{Topics: []string{"a"}, N: delayq.MaxReserveN + 1}, "bad_n"},
		{"wait too long", ReserveRequest{Topics: []string{"a"}, Wait: 2 * time.Minute}, "wait_too_long"},
		{"negative wait", ReserveRequest{Topics: []string{"a"}, Wait: -1}, "bad_wait"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.Reserve(context.Background(), tc.r)
			var ve *delayq.ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code {
				t.Fatalf("Reserve(%+v) = %v, want code %s", tc.r, err, tc.code)
			}
		})
	}
}

// freshSpy is a real memstore that also offers store.FreshPutter, and
// counts the jobs that came that way.
type freshSpy struct {
	*memstore.Store
	fresh int
}

func (s *freshSpy) PutFresh(ctx context.Context, jobs []*delayq.Job) error {
	s.fresh += len(jobs)
	return s.Store.Put(ctx, jobs)
}

// TestPutFreshOnlyForGeneratedIDs checks that the engine skips the store's
// duplicate check only when it made every id itself: a batch with one
// client id still goes through Put, which refuses a live id.
func TestPutFreshOnlyForGeneratedIDs(t *testing.T) {
	st := &freshSpy{Store: memstore.New()}
	e := New(st, Config{})
	ctx := context.Background()
	gen := PutRequest{Topic: "t", TTR: ptr(time.Second)}
	if _, err := e.Put(ctx, []PutRequest{gen, gen}); err != nil {
		t.Fatal(err)
	}
	if st.fresh != 2 {
		t.Errorf("after a put of 2 generated ids, %d jobs went through PutFresh, want 2", st.fresh)
	}
	own := PutRequest{Topic: "t", TTR: ptr(time.Second), ID: "mine"}
	if _, err := e.Put(ctx, []PutRequest{own}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Put(ctx, []PutRequest{gen, own}); !errors.Is(err, delayq.ErrExists) {
		t.Errorf("batch of a generated id and the live id %q = %v, want ErrExists", own.ID, err)
	}
	if st.fresh != 2 {
		t.Errorf("%d jobs went through PutFresh, want still 2 (client ids must be checked)", st.fresh)
	}
}

// renamingStore is a real memstore whose PutFresh gives every job an
// id of its own making, as the FreshPutter contract allows (redisstore
// makes ids that carry the seq).
type renamingStore struct {
	*memstore.Store
	given []string // the ids it gave
}

func (s *renamingStore) PutFresh(ctx context.Context, jobs []*delayq.Job) error {
	for _, j := range jobs {
		j.ID = uuid.Must(uuid.NewV7()).String()
		s.given = append(s.given, j.ID)
	}
	return s.Store.Put(ctx, jobs)
}

// TestPutAnswersTheStoresID checks that a put of ids the engine made
// answers with the ids the store gave the jobs in PutFresh, not the
// ones the engine made, and that the job is then found, reserved and
// finished by that id.
func TestPutAnswersTheStoresID(t *testing.T) {
	st := &renamingStore{Store: memstore.New()}
	e := New(st, Config{})
	ctx := context.Background()
	gen := PutRequest{Topic: "t", TTR: ptr(time.Minute)}
	jobs, err := e.Put(ctx, []PutRequest{gen, gen})
	if err != nil {
		t.Fatal(err)
	}
	if len(st.given) != 2 || jobs[0].ID != st.given[0] || jobs[1].ID != st.given[1] {
		t.Fatalf("put answered ids %s, %s; the store gave %v", jobs[0].ID, jobs[1].ID, st.given)
	}
	got, err := e.Get(ctx, delayq.Ref{ID: jobs[0].ID})
	if err != nil || got.Seq != jobs[0].Seq {
		t.Fatalf("Get(%s) = %+v, %v; want the job put", jobs[0].ID, got, err)
	}
	r, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, N: 1})
	if err != nil || len(r) != 1 || r[0].ID != jobs[0].ID {
		t.Fatalf("Reserve = %v, %v; want the job put first, by the store's id", r, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestActionValidation checks the rules every front end gets from the
// engine: consumer actions need a reservation, a kick's n is beanstalkd's
// bound, an update takes delay or at.
func TestActionValidation(t *testing.T) {
	e := New(memstore.New(), Config{})
	ctx := context.Background()
	if _, err := e.Put(ctx, []PutRequest{{ID: "a", Topic: "t", TTR: ptr(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	a := delayq.Ref{ID: "a"}
	tests := []struct {
		name string
		call func() error
		code string
	}{
		{"finish without reservation", func() error { _, err := e.Finish(ctx, a); return err }, "bad_reservation"},
		{"touch without reservation", func() error { _, err := e.Touch(ctx, a); return err }, "bad_reservation"},
		{"bury without reservation", func() error { _, err := e.Bury(ctx, BuryRequest{Ref: a}); return err }, "bad_reservation"},
		{"bury with a reason too long", func() error {
			_, err := e.Bury(ctx, BuryRequest{Ref: delayq.Ref{ID: "a", Reservation: "1-1"}, Reason: strings.Repeat("x", delayq.MaxReasonLen+1)})
			return err
		}, "bad_reason"},
		{"release with a reason of invalid UTF-8", func() error {
			_, err := e.Release(ctx, ReleaseRequest{Ref: delayq.Ref{ID: "a", Reservation: "1-1"}, Reason: "a\xffb"})
			return err
		}, "bad_reason"},
		{"release with a control character in the reason", func() error {
			_, err := e.Release(ctx, ReleaseRequest{Ref: delayq.Ref{ID: "a", Reservation: "1-1"}, Reason: "a\x1b[31mred"})
			return err
		}, "bad_reason"},
		{"release without reservation", func() error { _, err := e.Release(ctx, ReleaseRequest{Ref: a}); return err }, "bad_reservation"},
		{"kick negative", func() error { _, err := e.Kick(ctx, "t", -1, delayq.StateBuried); return err }, "bad_n"},
		{"kick over uint32", func() error { _, err := e.Kick(ctx, "t", MaxKick+1, delayq.StateBuried); return err }, "bad_n"},
		{"kick ready", func() error { _, err := e.Kick(ctx, "t", 1, delayq.StateReady); return err }, "bad_state"},
		{"kick an unknown state", func() error { _, err := e.Kick(ctx, "t", 1, "failed-ones"); return err }, "bad_state"},
		{"update delay and at", func() error {
			_, err := e.Update(ctx, UpdateRequest{Ref: a, Delay: ptr(time.Second), At: ptr(time.Now())})
			return err
		}, "bad_delay"},
		{"update at year 0", func() error { _, err := e.Update(ctx, UpdateRequest{Ref: a, At: ptr(time.Time{})}); return err }, "bad_at"},
		{"list limit", func() error { _, err := e.List(ctx, ListRequest{Topic: "t", Limit: 1001}); return err }, "bad_limit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			var ve *delayq.ValidationError
			if !errors.As(err, &ve) || ve.Code != tc.code {
				t.Fatalf("%s = %v, want code %s", tc.name, err, tc.code)
			}
		})
	}
	if res, err := e.Kick(ctx, "t", 0, delayq.StateBuried); err != nil || res.Kicked != 0 {
		t.Errorf("Kick(0) = %+v, %v; want nothing kicked, no error", res, err)
	}
}

// TestErrorsNameTheJob checks that the engine's errors read as the
// problem with the job, not the layers it passed through.
func TestErrorsNameTheJob(t *testing.T) {
	e := New(memstore.New(), Config{})
	ctx := context.Background()
	_, err := e.Get(ctx, delayq.Ref{ID: "nosuch"})
	if !errors.Is(err, delayq.ErrNotFound) || delayq.Message(err) != `job "nosuch" not found` {
		t.Errorf("Get(nosuch) = %v (message %q), want ErrNotFound saying job \"nosuch\" not found", err, delayq.Message(err))
	}
	put := []PutRequest{{ID: "a", Topic: "t", TTR: ptr(time.Second)}}
	if _, err := e.Put(ctx, put); err != nil {
		t.Fatal(err)
	}
	batch := []PutRequest{{ID: "b", Topic: "t", TTR: ptr(time.Second)}, put[0]}
	_, err = e.Put(ctx, batch)
	if !errors.Is(err, delayq.ErrExists) || delayq.Message(err) != `job "a" already exists (ready)` {
		t.Errorf("Put of a live id = %v (message %q), want ErrExists naming \"a\"", err, delayq.Message(err))
	}
}

// TestKickSaysWhichKind checks that beanstalkd's topic kick (state "")
// reports buried jobs when there were any, else delayed ones.
func TestKickSaysWhichKind(t *testing.T) {
	e := New(memstore.New(), Config{})
	ctx := context.Background()
	if _, err := e.Put(ctx, []PutRequest{{ID: "d", Topic: "t", TTR: ptr(time.Second), Delay: ptr(time.Hour)}, {ID: "b", Topic: "t", TTR: ptr(time.Second)}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reserve = %v, %v", jobs, err)
	}
	if _, err := e.Bury(ctx, BuryRequest{Ref: delayq.Ref{ID: "b", Reservation: jobs[0].Reservation}}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Kick(ctx, "t", 10, ""); err != nil || res != (KickResult{Kicked: 1, State: delayq.StateBuried}) {
		t.Errorf("first kick = %+v, %v; want 1 buried", res, err)
	}
	if res, err := e.Kick(ctx, "t", 10, ""); err != nil || res != (KickResult{Kicked: 1, State: delayq.StateDelayed}) {
		t.Errorf("second kick = %+v, %v; want 1 delayed", res, err)
	}
}

// TestKickBuriedNeverFiresDelayed checks that a kick of buried jobs (an
// operator's "retry failed jobs") leaves a job due later alone even when
// nothing is buried, and that firing delayed jobs early is its own kick,
// which says how many it fired.
func TestKickBuriedNeverFiresDelayed(t *testing.T) {
	e := New(memstore.New(), Config{})
	ctx := context.Background()
	if _, err := e.Put(ctx, []PutRequest{{ID: "d", Topic: "t", TTR: ptr(time.Second), Delay: ptr(30 * time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	if res, err := e.Kick(ctx, "t", 10, delayq.StateBuried); err != nil || res != (KickResult{Kicked: 0, State: delayq.StateBuried}) {
		t.Errorf("kick of buried jobs = %+v, %v; want 0 buried", res, err)
	}
	if j, err := e.Get(ctx, delayq.Ref{ID: "d"}); err != nil || j.State != delayq.StateDelayed {
		t.Fatalf("job d after a kick of buried jobs = %v, %v; want delayed", j, err)
	}
	if res, err := e.Kick(ctx, "t", 10, delayq.StateDelayed); err != nil || res != (KickResult{Kicked: 1, State: delayq.StateDelayed}) {
		t.Errorf("kick of delayed jobs = %+v, %v; want 1 delayed", res, err)
	}
	if j, err := e.Get(ctx, delayq.Ref{ID: "d"}); err != nil || j.State != delayq.StateReady {
		t.Errorf("job d after a kick of delayed jobs = %v, %v; want ready", j, err)
	}
}

// TestDelayCountsFromTheExactInstant: a delay runs from the instant of the
// request, not from the start of its millisecond, so put, release and
// update mid-millisecond never make a job due before now+delay; a zero
// delay still means ready at once.
func TestDelayCountsFromTheExactInstant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		time.Sleep(600 * time.Microsecond) // now is mid-millisecond
		const d = time.Second
		notBefore := func(what string, j *delayq.Job) {
			t.Helper()
			if want := time.Now().Add(d); j.Due.Before(want) {
				t.Errorf("%s: Due = %s, before now+%s = %s", what, j.Due.Format(time.StampMicro), d, want.Format(time.StampMicro))
			}
		}
		notBefore("put", h.put(PutRequest{ID: "a", Delay: ptr(d)}))
		if j := h.put(PutRequest{ID: "b", Delay: ptr(time.Duration(0))}); j.State != delayq.StateReady {
			t.Errorf("put with delay 0: state %s, want ready", j.State)
		}
		j := h.reserve(0, "t")[0]
		rel, err := h.e.Release(context.Background(), ReleaseRequest{Ref: delayq.Ref{ID: "b", Reservation: j.Reservation}, Delay: d})
		if err != nil {
			t.Fatalf("Release = %v", err)
		}
		notBefore("release", rel)
		up, err := h.e.Update(context.Background(), UpdateRequest{Ref: delayq.Ref{ID: "a"}, Delay: ptr(d)})
		if err != nil {
			t.Fatalf("Update = %v", err)
		}
		notBefore("update", up)
	})
}
