package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

func TestNewPolicyDefaultsAndCodes(t *testing.T) {
	sec := time.Second
	p, err := NewPolicy(PolicySpec{Backoff: &BackoffSpec{Initial: &sec}})
	if err != nil || *p.Backoff != (store.Backoff{Initial: time.Second, Max: DefaultBackoffMax, Factor: 2}) {
		t.Fatalf("NewPolicy(backoff 1s) = %+v, %v; want max 1h, factor 2, jitter 0", p.Backoff, err)
	}
	day := 24 * time.Hour
	if p, _ := NewPolicy(PolicySpec{Backoff: &BackoffSpec{Initial: &day}}); p.Backoff.Max != day {
		t.Errorf("an initial past the default max: max %s, want %s", p.Backoff.Max, day)
	}
	nan, neg := 0.0/zero(), -1
	for _, tc := range []struct {
		spec PolicySpec
		code string
	}{
		{PolicySpec{}, delayq.CodeBadPolicy},
		{PolicySpec{MaxJobs: &neg}, delayq.CodeBadMaxJobs},
		{PolicySpec{Backoff: &BackoffSpec{Initial: &sec, Factor: &nan}}, delayq.CodeBadBackoff},
		{PolicySpec{Backoff: &BackoffSpec{Initial: &sec, Jitter: &nan}}, delayq.CodeBadBackoff},
	} {
		var ve *delayq.ValidationError
		if _, err := NewPolicy(tc.spec); !errors.As(err, &ve) || ve.Code != tc.code {
			t.Errorf("NewPolicy(%+v) = %v, want %s", tc.spec, err, tc.code)
		}
	}
}

func zero() float64 { return 0 }

// An engine backs off a release without a delay by its topic's policy,
// and a TTR expiry too; other topics are not touched.
func TestEngineBackoff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		ctx := context.Background()
		bo := store.Backoff{Initial: 10 * time.Second, Max: time.Minute, Factor: 3}
		if created, err := h.e.SetPolicy(ctx, "t", Policy{Backoff: &bo}); err != nil || !created {
			t.Fatalf("SetPolicy = %v, %v", created, err)
		}
		a := h.put(PutRequest{ID: "a", TTR: ptr(5 * time.Second)})
		h.put(PutRequest{ID: "u", Topic: "u"})
		for attempt, want := range []time.Duration{10 * time.Second, 30 * time.Second} {
			j := h.reserve(0, "t")[0]
			got, err := h.e.Release(ctx, ReleaseRequest{Ref: delayq.Ref{ID: "a", Reservation: j.Reservation}})
			if err != nil {
				t.Fatal(err)
			}
			if now := delayq.TruncMilli(time.Now()); got.State != delayq.StateDelayed || !got.Due.Equal(now.Add(want)) {
				t.Fatalf("release %d without a delay: %s due %s, want delayed due now+%s", attempt+1, got.State, got.Due, want)
			}
			time.Sleep(want)
			synctest.Wait()
		}
		// The third attempt's TTR runs out: 10s·3² = 90s, capped at 1m.
		j := h.reserve(0, "t")[0]
		time.Sleep(5 * time.Second)
		synctest.Wait()
		got, _ := h.e.Get(ctx, delayq.Ref{ID: "a"})
		if got.State != delayq.StateDelayed || !got.Due.Equal(j.Deadline.Add(time.Minute)) || got.Timeouts != 1 {
			t.Fatalf("after the TTR ran out: %+v, want delayed due deadline+1m", got)
		}
		if n := h.e.Metrics().TimeoutsTotal(); n != 1 {
			t.Errorf("TTR expiries counted: %d, want 1", n)
		}
		_ = a
		// No policy: ready at once.
		u := h.reserve(0, "u")[0]
		got, _ = h.e.Release(ctx, ReleaseRequest{Ref: delayq.Ref{ID: "u", Reservation: u.Reservation}})
		if got.State != delayq.StateReady {
			t.Errorf("release in a topic without a policy: %s, want ready", got.State)
		}
		if err := h.e.DeletePolicy(ctx, "t"); err != nil {
			t.Fatal(err)
		}
		if err := h.e.DeletePolicy(ctx, "t"); !errors.Is(err, delayq.ErrNotFound) {
			t.Errorf("DeletePolicy of none = %v, want ErrNotFound", err)
		}
	})
}

// shared makes a memstore look shared (a store.Notifier), so the
// engines over it refresh their policies as over Redis.
type shared struct{ *memstore.Store }

func (shared) Notify(ctx context.Context) (<-chan store.Event, error) {
	ch := make(chan store.Event)
	go func() { <-ctx.Done(); close(ch) }()
	return ch, nil
}

// A policy set through one engine reaches another over the same shared
// store within PolicyRefresh.
func TestPolicyPropagatesBetweenInstances(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := shared{memstore.New()}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		a, b := New(st, Config{PolicyRefresh: time.Second}), New(st, Config{PolicyRefresh: time.Second})
		go a.Run(ctx)
		go b.Run(ctx)
		put := func(e *Engine, id string) *delayq.Job {
			jobs, err := e.Put(ctx, []PutRequest{{ID: id, Topic: "t"}})
			if err != nil {
				t.Fatal(err)
			}
			return jobs[0]
		}
		put(b, "before") // b has loaded its (empty) policies
		if _, err := a.SetPolicy(ctx, "t", Policy{TTR: 7 * time.Second}); err != nil {
			t.Fatal(err)
		}
		if j := put(a, "a"); j.TTR != 7*time.Second {
			t.Errorf("the writing engine at once: ttr %s, want 7s", j.TTR)
		}
		time.Sleep(time.Second + time.Millisecond)
		synctest.Wait()
		if j := put(b, "b"); j.TTR != 7*time.Second {
			t.Errorf("the other engine after PolicyRefresh: ttr %s, want 7s", j.TTR)
		}
		cancel()
		synctest.Wait()
	})
}

// The engine fills every field a producer left out, in one place, so a
// front end that only translates its wire gets the defaults and the
// topic's policy without repeating them: nil ttr, priority and
// max_attempts take the policy's ttr and max_attempts, else the
// defaults (DefaultTTR in the request before delayq.DefaultTTR); a field
// given, zero included, is kept.
func TestPutFillsDefaultsAndPolicy(t *testing.T) {
	ctx := context.Background()
	e := New(memstore.New(), Config{})
	if _, err := e.SetPolicy(ctx, "p", Policy{TTR: 7 * time.Second, MaxAttempts: 3}); err != nil {
		t.Fatal(err)
	}
	type want struct {
		ttr      time.Duration
		pri      uint32
		attempts int
	}
	reqs := []PutRequest{
		{Topic: "t"},
		{Topic: "p"},
		{Topic: "t", DefaultTTR: time.Second},
		{Topic: "p", DefaultTTR: time.Second},
		{Topic: "p", TTR: ptr(2 * time.Second), Priority: ptr[uint32](0), MaxAttempts: ptr(0)},
		{Topic: "t", TTR: ptr(2 * time.Second), Priority: ptr[uint32](5), MaxAttempts: ptr(4)},
	}
	wants := []want{
		{delayq.DefaultTTR, delayq.DefaultPriority, 0},
		{7 * time.Second, delayq.DefaultPriority, 3},
		{time.Second, delayq.DefaultPriority, 0},
		{7 * time.Second, delayq.DefaultPriority, 3},
		{2 * time.Second, 0, 0},
		{2 * time.Second, 5, 4},
	}
	jobs, err := e.Put(ctx, reqs)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := range jobs {
		stored, err := e.Get(ctx, delayq.Ref{ID: j.ID})
		if err != nil {
			t.Fatal(err)
		}
		for _, got := range []*delayq.Job{j, stored} {
			if g := (want{got.TTR, got.Priority, got.MaxAttempts}); g != wants[i] {
				t.Errorf("put %d (%+v): ttr, priority, max_attempts = %v, want %v", i, reqs[i], g, wants[i])
			}
		}
	}
	// The request is the caller's: the engine fills a copy.
	if reqs[1].TTR != nil || reqs[1].Priority != nil || reqs[1].MaxAttempts != nil {
		t.Errorf("Put wrote the defaults into the caller's request: %+v", reqs[1])
	}
}

// policyGate is a store whose policy reads can be held (hold: the next
// ListDocs of policies reads, says so on held, and returns only when
// release is closed) or failed (failNext), and whose SaveDoc cancels the
// writer's context once the write is done (cancelAfterSave): a client
// that hangs up right after its policy write.
type policyGate struct {
	*memstore.Store
	mu              sync.Mutex
	hold            bool
	held, release   chan struct{}
	failNext        bool
	cancelAfterSave context.CancelFunc
}

func (g *policyGate) ListDocs(ctx context.Context, kind string) ([]*store.Doc, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // as a networked store answers a cancelled call
	}
	g.mu.Lock()
	hold, fail := g.hold && kind == store.KindPolicy, g.failNext && kind == store.KindPolicy
	if hold {
		g.hold = false
	}
	if fail {
		g.failNext = false
	}
	g.mu.Unlock()
	if fail {
		return nil, errors.New("injected: store unreachable")
	}
	docs, err := g.Store.ListDocs(ctx, kind)
	if hold {
		close(g.held)
		<-g.release
	}
	return docs, err
}

func (g *policyGate) SaveDoc(ctx context.Context, kind string, d *store.Doc, prev uint64) error {
	err := g.Store.SaveDoc(ctx, kind, d, prev)
	g.mu.Lock()
	if c := g.cancelAfterSave; c != nil && kind == store.KindPolicy {
		c()
	}
	g.mu.Unlock()
	return err
}

// A reload that read the policies before a write never installs its
// stale read after the write, whether the write's own reload is cut off
// by its client hanging up or fails in the store: the put after it takes
// the new policy (issue 28, item 11).
func TestPolicyWriteRetiresOlderReloads(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failNext bool
	}{{"client hangs up", false}, {"reload fails", true}} {
		t.Run(tc.name, func(t *testing.T) {
			g := &policyGate{Store: memstore.New(), held: make(chan struct{}), release: make(chan struct{})}
			h := startOn(t, g, Config{})
			ctx := context.Background()
			if _, err := h.e.SetPolicy(ctx, "t", Policy{TTR: 10 * time.Second}); err != nil {
				t.Fatal(err)
			}
			// A reload reads the old policy and is held before it installs it.
			g.mu.Lock()
			g.hold = true
			g.mu.Unlock()
			older := make(chan error, 1)
			go func() { _, err := h.e.Policies(ctx); older <- err }()
			<-g.held
			// The write; its client hangs up as the write returns.
			wctx, cancel := context.WithCancel(ctx)
			defer cancel()
			g.mu.Lock()
			g.cancelAfterSave, g.failNext = cancel, tc.failNext
			g.mu.Unlock()
			if _, err := h.e.SetPolicy(wctx, "t", Policy{TTR: 20 * time.Second}); err != nil {
				t.Fatalf("SetPolicy = %v; the write is durable, its reload is the engine's business", err)
			}
			g.mu.Lock()
			g.cancelAfterSave = nil
			g.mu.Unlock()
			close(g.release)
			if err := <-older; err != nil {
				t.Fatal(err)
			}
			if j := h.put(PutRequest{ID: "a", Topic: "t"}); j.TTR != 20*time.Second {
				t.Fatalf("a put after the write took ttr %s from the policies, want the new 20s", j.TTR)
			}
		})
	}
}
