package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/google/go-cmp/cmp"
)

// consume runs cs.Consume in the background and returns a stop function
// that cancels it and waits for it to return.
func consume(t *testing.T, cs *Consumer, h Handler) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- cs.Consume(ctx, h) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-done
		})
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// waitFor polls cond every 10 ms until it holds or 10 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

// topicCounts returns a topic's ready, reserved, delayed and buried counts.
func topicCounts(t *testing.T, c *Client, topic string) [4]int {
	t.Helper()
	top, err := c.Topic(t.Context(), topic)
	if errors.Is(err, delayq.ErrNotFound) {
		return [4]int{}
	}
	if err != nil {
		t.Fatalf("Topic(%q) = %v", topic, err)
	}
	return [4]int{top.Ready, top.Reserved, top.Delayed, top.Buried}
}

// putN puts n ready jobs named topic-0 ... into topic.
func putN(t *testing.T, p *Producer, topic string, n int, opts ...PutOption) {
	t.Helper()
	for i := range n {
		o := append([]PutOption{ID(fmt.Sprintf("%s-%d", topic, i))}, opts...)
		if _, err := p.Delay(t.Context(), topic, []byte(fmt.Sprint(i)), 0, o...); err != nil {
			t.Fatal(err)
		}
	}
}

func TestConsumerRunsEveryJobOnce(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "a", 20)
	putN(t, c.Producer(), "b", 5)
	var mu sync.Mutex
	seen := map[string]int{}
	cs := NewConsumer([]string{srv.URL}, "a", Topics("b"), Concurrency(4), UseClient(c))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		mu.Lock()
		seen[j.ID]++
		mu.Unlock()
		return nil
	})
	waitFor(t, "every job finished", func() bool {
		return topicCounts(t, c, "a") == [4]int{} && topicCounts(t, c, "b") == [4]int{}
	})
	if err := stop(); err != nil {
		t.Errorf("Consume = %v, want nil after cancel", err)
	}
	if len(seen) != 25 {
		t.Errorf("handled %d distinct jobs, want 25", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %s handled %d times, want 1", id, n)
		}
	}
}

func TestConsumerHoldsNoMoreJobsThanWorkers(t *testing.T) {
	t.Parallel()
	held := &heldCounter{t: t, limit: 3}
	srv, c := newTestClient(t, HTTPClient(&http.Client{Transport: held}))
	putN(t, c.Producer(), "busy", 10)
	release := make(chan struct{})
	var running atomic.Int32
	cs := NewConsumer([]string{srv.URL}, "busy", Concurrency(3), UseClient(c))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		running.Add(1)
		<-release
		return nil
	})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before consume's stop, which waits for the handlers
	waitFor(t, "3 handlers running", func() bool { return running.Load() >= 3 })
	if got := topicCounts(t, c, "busy"); got != [4]int{7, 3, 0, 0} {
		t.Errorf("counts while 3 workers busy = %v, want 7 ready 3 reserved", got)
	}
	// While the workers are busy, the consumer must not even ask: the
	// transport fails the test on any reserve that asks for more jobs
	// than workers are free, now or later in the run.
	free()
	waitFor(t, "all done", func() bool { return topicCounts(t, c, "busy") == [4]int{} })
	stop()
	if held.reserves.Load() < 4 {
		t.Errorf("%d reserves for 10 jobs on 3 workers, want at least 4", held.reserves.Load())
	}
}

// heldCounter is a transport that counts the jobs a consumer holds (those
// a reserve answered, less those finished, released or buried) and fails
// the test when a reserve asks for more than limit minus held. It sees an
// answer before the consumer does, and a finish's answer before the
// consumer frees that worker, so the check is exact, not a matter of time.
type heldCounter struct {
	t        *testing.T
	limit    int
	reserves atomic.Int32

	mu   sync.Mutex
	held int // guarded by mu
}

func (h *heldCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	reserve := req.URL.Path == "/v1/reserve"
	settle := strings.HasSuffix(req.URL.Path, "/finish") || strings.HasSuffix(req.URL.Path, "/release") || strings.HasSuffix(req.URL.Path, "/bury")
	if reserve {
		h.reserves.Add(1)
		body, _ := io.ReadAll(req.Body)
		req.Body = io.NopCloser(bytes.NewReader(body))
		var in api.ReserveRequest
		json.Unmarshal(body, &in)
		n := max(in.N, 1) // the wire's default
		h.mu.Lock()
		if n+h.held > h.limit {
			h.t.Errorf("reserve asked for %d jobs while the consumer held %d on %d workers", n, h.held, h.limit)
		}
		h.mu.Unlock()
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil || resp.StatusCode >= 300 {
		return resp, err
	}
	switch {
	case reserve:
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var out api.JobsResponse
		json.Unmarshal(body, &out)
		h.mu.Lock()
		h.held += len(out.Jobs)
		h.mu.Unlock()
		return resp, err
	case req.URL.Path == "/v1/jobs/finish": // a batch finish settles each entry that succeeded
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		resp.Body = io.NopCloser(bytes.NewReader(body))
		var out api.FinishBatchResponse
		json.Unmarshal(body, &out)
		h.mu.Lock()
		for _, r := range out.Results {
			if r.OK {
				h.held--
			}
		}
		h.mu.Unlock()
		return resp, err
	case settle:
		h.mu.Lock()
		h.held--
		h.mu.Unlock()
	}
	return resp, nil
}

func TestConsumerIdleLongPolls(t *testing.T) {
	t.Parallel()
	srv := delayqtestServer(t)
	var reserves atomic.Int32
	c := New([]string{srv.URL})
	defer c.Close()
	cs := NewConsumer(nil, "idle", UseClient(c), Wait(time.Second),
		WithHooks(Hooks{Start: func(*Job) { reserves.Add(1) }}))
	stop := consume(t, cs, func(context.Context, *Job) error { return nil })
	waitFor(t, "the consumer waiting on the server", func() bool { return srv.Engine().Waiting("idle") == 1 })
	put := time.Now()
	if _, err := c.Producer().Delay(t.Context(), "idle", nil, 0); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the job to start", func() bool { return reserves.Load() == 1 })
	if d := time.Since(put); d > 500*time.Millisecond {
		t.Errorf("job started %v after its put, want at once (long-poll)", d)
	}
	stop()
}

func TestConsumerRetriesWithBackoff(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "flaky", 1)
	var runs []time.Time
	var attempts []int
	var mu sync.Mutex
	cs := NewConsumer([]string{srv.URL}, "flaky", UseClient(c),
		RetryBackoff(func(n int) time.Duration { return time.Duration(n) * 300 * time.Millisecond }))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, time.Now())
		attempts = append(attempts, j.Attempts)
		if len(runs) < 3 {
			return errors.New("try later")
		}
		return nil
	})
	waitFor(t, "the job to succeed", func() bool { return topicCounts(t, c, "flaky") == [4]int{} })
	stop()
	if diff := cmp.Diff([]int{1, 2, 3}, attempts); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	for i, want := range []time.Duration{300 * time.Millisecond, 600 * time.Millisecond} {
		if got := runs[i+1].Sub(runs[i]); got < want {
			t.Errorf("run %d came %v after run %d, want at least the backoff %v", i+2, got, i+1, want)
		}
	}
}

func TestConsumerBuriesPermanentErrors(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "perm", 1)
	var failures atomic.Int32
	var next atomic.Value
	cs := NewConsumer([]string{srv.URL}, "perm", UseClient(c), WithHooks(Hooks{
		Failure: func(j *Job, took time.Duration, err error, n string, d time.Duration) {
			next.Store(n)
			failures.Add(1)
		},
	}))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		return Permanent(errors.New("malformed order"))
	})
	waitFor(t, "the job buried", func() bool { return topicCounts(t, c, "perm") == [4]int{0, 0, 0, 1} })
	stop()
	if failures.Load() != 1 || next.Load() != "bury" {
		t.Errorf("failure hook: %d calls, next %v; want 1, bury", failures.Load(), next.Load())
	}
	// The handler's error is the job's reason, for operators who read the
	// server rather than this consumer's log.
	j, err := c.Get(t.Context(), "perm-0")
	if err != nil || j.LastReason != "permanent: malformed order" || j.Buries != 1 || j.LastFailed.IsZero() {
		t.Errorf("Get(perm-0) = %+v, %v; want buried once with reason %q", j, err, "permanent: malformed order")
	}
}

// TestConsumerReleaseCarriesReason: a handler's error released with
// backoff is the job's reason while it waits for its next run.
func TestConsumerReleaseCarriesReason(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "why", 1)
	cs := NewConsumer([]string{srv.URL}, "why", UseClient(c), RetryBackoff(func(int) time.Duration { return time.Hour }))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		return fmt.Errorf("upstream answered %d", 503)
	})
	waitFor(t, "the job released with backoff", func() bool { return topicCounts(t, c, "why") == [4]int{0, 0, 1, 0} })
	stop()
	j, err := c.Get(t.Context(), "why-0")
	if err != nil || j.State != delayq.StateDelayed || j.LastReason != "upstream answered 503" || j.Releases != 1 {
		t.Errorf("Get(why-0) = %+v, %v; want delayed, released once, reason %q", j, err, "upstream answered 503")
	}
}

func TestConsumerRecoversPanics(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "panic", 1)
	var calls atomic.Int32
	var herr atomic.Value
	cs := NewConsumer([]string{srv.URL}, "panic", UseClient(c),
		RetryBackoff(func(int) time.Duration { return 0 }),
		WithHooks(Hooks{Failure: func(j *Job, _ time.Duration, err error, _ string, _ time.Duration) { herr.Store(err) }}))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		return nil
	})
	waitFor(t, "the job to succeed after the panic", func() bool { return topicCounts(t, c, "panic") == [4]int{} })
	stop()
	if err, _ := herr.Load().(error); err == nil || calls.Load() != 2 {
		t.Errorf("after a panic: %d calls, failure %v; want 2 calls and the panic as an error", calls.Load(), err)
	}
}

func TestConsumerMaxAttemptsBuries(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "max", 1, MaxAttempts(2))
	var calls atomic.Int32
	cs := NewConsumer([]string{srv.URL}, "max", UseClient(c), RetryBackoff(func(int) time.Duration { return 0 }))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		calls.Add(1)
		return errors.New("always")
	})
	waitFor(t, "the job buried", func() bool { return topicCounts(t, c, "max") == [4]int{0, 0, 0, 1} })
	stop()
	if calls.Load() != 2 {
		t.Errorf("handler ran %d times, want MaxAttempts = 2", calls.Load())
	}
}

func TestConsumerHandlerContextEndsBeforeTTR(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "slow", 1, TTR(time.Second))
	type run struct {
		attempt  int
		cause    error
		ctxEnd   time.Time
		deadline time.Time
	}
	runs := make(chan run, 4)
	cs := NewConsumer([]string{srv.URL}, "slow", UseClient(c), SafetyMargin(200*time.Millisecond),
		RetryBackoff(func(int) time.Duration { return 0 }))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		if j.Attempts > 1 {
			runs <- run{attempt: j.Attempts}
			return nil
		}
		<-ctx.Done()
		runs <- run{j.Attempts, context.Cause(ctx), time.Now(), j.Deadline}
		return ctx.Err()
	})
	first := <-runs
	if !errors.Is(first.cause, ErrTTR) {
		t.Errorf("handler context cause = %v, want ErrTTR", first.cause)
	}
	if early := first.deadline.Sub(first.ctxEnd); early < 100*time.Millisecond {
		t.Errorf("handler context ended %v before the TTR deadline, want about the 200ms margin", early)
	}
	if second := <-runs; second.attempt != 2 {
		t.Errorf("second run attempt = %d, want 2", second.attempt)
	}
	waitFor(t, "the job done", func() bool { return topicCounts(t, c, "slow") == [4]int{} })
	stop()
}

func TestConsumerTouchExtends(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		opts   []ConsumerOption
		manual bool
	}{
		{name: "j.Touch", manual: true},
		{name: "AutoTouch", opts: []ConsumerOption{AutoTouch(0)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, c := newTestClient(t)
			// TTR 3s, a run of 6.5s, touches every 0.5s (or at half the
			// TTR): room for a slow touch on a loaded machine.
			putN(t, c.Producer(), "long", 1, TTR(3*time.Second))
			var attempts []int
			var mu sync.Mutex
			cs := NewConsumer([]string{srv.URL}, "long", append(tt.opts, UseClient(c))...)
			stop := consume(t, cs, func(ctx context.Context, j *Job) error {
				mu.Lock()
				attempts = append(attempts, j.Attempts)
				mu.Unlock()
				for range 13 { // 6.5 s: more than twice the TTR
					select {
					case <-ctx.Done():
						return context.Cause(ctx)
					case <-time.After(500 * time.Millisecond):
					}
					if tt.manual {
						if err := j.Touch(ctx); err != nil {
							return err
						}
					}
				}
				return nil
			})
			waitFor(t, "the job done", func() bool { return topicCounts(t, c, "long") == [4]int{} })
			stop()
			if diff := cmp.Diff([]int{1}, attempts); diff != "" {
				t.Errorf("attempts (-want +got), want one run outliving its TTR:\n%s", diff)
			}
		})
	}
}

func TestConsumerShutdownLetsHandlersFinish(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "drain", 3)
	var started, finished atomic.Int32
	cs := NewConsumer([]string{srv.URL}, "drain", UseClient(c), Concurrency(3), Grace(10*time.Second))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- cs.Consume(ctx, func(hctx context.Context, j *Job) error {
			started.Add(1)
			<-ctx.Done() // still working when the shutdown comes
			if hctx.Err() != nil {
				return hctx.Err()
			}
			finished.Add(1)
			return nil
		})
	}()
	waitFor(t, "3 handlers running", func() bool { return started.Load() == 3 })
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Consume = %v, want nil", err)
	}
	if finished.Load() != 3 {
		t.Errorf("%d handlers finished, want all 3 within the grace period", finished.Load())
	}
	if got := topicCounts(t, c, "drain"); got != [4]int{} {
		t.Errorf("counts after drain = %v, want every job finished", got)
	}
}

func TestConsumerShutdownReleasesAfterGrace(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "stuck", 4)
	var mu sync.Mutex
	done := map[string]int{}
	var started atomic.Int32
	cs := NewConsumer([]string{srv.URL}, "stuck", UseClient(c), Concurrency(2), Grace(100*time.Millisecond))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		started.Add(1)
		<-ctx.Done() // never finishes on its own
		if !errors.Is(context.Cause(ctx), ErrShutdown) {
			t.Errorf("cause = %v, want ErrShutdown", context.Cause(ctx))
		}
		return ctx.Err()
	})
	waitFor(t, "2 handlers running", func() bool { return started.Load() == 2 })
	if err := stop(); err != nil {
		t.Errorf("Consume = %v", err)
	}
	if got := topicCounts(t, c, "stuck"); got != [4]int{4, 0, 0, 0} {
		t.Fatalf("counts after shutdown = %v, want all 4 ready again (none lost, none held)", got)
	}
	// A second consumer gets every job exactly once.
	cs2 := NewConsumer([]string{srv.URL}, "stuck", UseClient(c), Concurrency(2))
	stop2 := consume(t, cs2, func(ctx context.Context, j *Job) error {
		mu.Lock()
		done[j.ID]++
		mu.Unlock()
		return nil
	})
	waitFor(t, "the rest done", func() bool { return topicCounts(t, c, "stuck") == [4]int{} })
	stop2()
	want := map[string]int{"stuck-0": 1, "stuck-1": 1, "stuck-2": 1, "stuck-3": 1}
	if diff := cmp.Diff(want, done); diff != "" {
		t.Errorf("jobs finished by the second consumer (-want +got):\n%s", diff)
	}
}

func TestConsumerHooks(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	putN(t, c.Producer(), "hooks", 2)
	var mu sync.Mutex
	var events []string
	cs := NewConsumer([]string{srv.URL}, "hooks", UseClient(c), WithHooks(Hooks{
		Start: func(j *Job) { mu.Lock(); events = append(events, "start "+j.ID); mu.Unlock() },
		Finish: func(j *Job, took time.Duration, err error) {
			mu.Lock()
			events = append(events, fmt.Sprintf("finish %s %v", j.ID, err))
			mu.Unlock()
		},
		Failure: func(j *Job, took time.Duration, err error, next string, d time.Duration) {
			mu.Lock()
			events = append(events, fmt.Sprintf("failure %s %s", j.ID, next))
			mu.Unlock()
		},
	}))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		if j.ID == "hooks-1" {
			return Permanent(errors.New("no"))
		}
		return nil
	})
	waitFor(t, "both handled", func() bool { return topicCounts(t, c, "hooks") == [4]int{0, 0, 0, 1} })
	stop()
	want := []string{"start hooks-0", "finish hooks-0 <nil>", "start hooks-1", "failure hooks-1 bury"}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
}

func TestConsumerRejectsBadTopic(t *testing.T) {
	t.Parallel()
	cs := NewConsumer([]string{"127.0.0.1:1"}, "-bad")
	if err := cs.Consume(t.Context(), func(context.Context, *Job) error { return nil }); !errors.Is(err, delayq.ErrInvalid) {
		t.Errorf("Consume(-bad) = %v, want ErrInvalid", err)
	}
}

func TestConsumerDeadlineCountsFromReserveNotLongPoll(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	left := make(chan time.Duration, 1)
	cs := NewConsumer([]string{srv.URL}, "late", UseClient(c), Wait(10*time.Second))
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		d, _ := ctx.Deadline()
		left <- time.Until(d)
		return nil
	})
	waitFor(t, "the consumer long-polling", func() bool { return srv.Engine().Waiting("late") == 1 })
	time.Sleep(1500 * time.Millisecond) // longer than the TTR
	putN(t, c.Producer(), "late", 1, TTR(time.Second))
	if d := <-left; d < 500*time.Millisecond || d > time.Second {
		t.Errorf("handler started with %v before its context ends, want most of the 1s TTR (the long poll does not count)", d)
	}
	stop()
}
