package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// SharedFactory opens several instances of one deployment over one shared
// store (Redis, Postgres): the stores that implement store.Cluster.
type SharedFactory struct {
	// Open returns n (>= 2) instances of one new, empty deployment with
	// retention r. They must use short lease and heartbeat times (at most
	// a couple of seconds), so work moves off a crashed instance while the
	// suite waits. The suite closes every instance it does not Crash.
	Open func(t *testing.T, n int, r store.Retention) []store.Store
	// Crash stops s as kill -9 stops its process: its loops and
	// connections end, nothing is handed back, and what it held (leases,
	// its heartbeat) stays in the shared store until it runs out. Nil
	// skips the failover group.
	Crash func(t *testing.T, s store.Store)
}

// sharedWait bounds how long the suite waits for asynchronous work of a
// shared store: leases taken or moved, events delivered. It is a limit,
// never a pause: every wait polls observable state.
const sharedWait = 15 * time.Second

// RunShared runs the multi-instance groups: what the contract promises
// when several instances share one store. Every backend that several
// instances can share must pass it besides Run.
//
// Unlike Run, these groups use the real clock for due times: a shared
// store divides the timer's work by leases that live in real time.
func RunShared(t *testing.T, f SharedFactory) {
	t.Helper()
	if f.Open == nil {
		t.Fatal("storetest.RunShared: SharedFactory.Open is nil")
	}
	groups := []struct {
		name string
		run  func(t *testing.T, f SharedFactory)
	}{
		{"SeenByEveryInstance", testSharedSeen},
		{"OneJobPerReserve", testSharedReserve},
		{"TickMovesOnce", testSharedTick},
		{"DocWriteOneWins", testSharedDocs},
		{"RetainedAcrossInstances", testSharedRetained},
		{"Notify", testSharedNotify},
		{"Members", testSharedMembers},
		{"WorkMovesOffACrash", testSharedFailover},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { g.run(t, f) })
	}
}

// openShared opens n instances, closing each at cleanup unless crashed.
func openShared(t *testing.T, f SharedFactory, n int, r store.Retention) []store.Store {
	t.Helper()
	ss := f.Open(t, n, r)
	if len(ss) != n {
		t.Fatalf("SharedFactory.Open(%d) returned %d instances", n, len(ss))
	}
	return ss
}

// sharedSet holds a group's instances and closes, at cleanup, those a
// group did not crash.
type sharedSet struct {
	t      *testing.T
	ss     []store.Store
	closed []bool
	mu     sync.Mutex
}

func newSharedSet(t *testing.T, f SharedFactory, n int, r store.Retention) *sharedSet {
	t.Helper()
	set := &sharedSet{t: t, ss: openShared(t, f, n, r), closed: make([]bool, n)}
	t.Cleanup(func() {
		for i, s := range set.ss {
			if !set.gone(i) {
				if err := s.Close(); err != nil {
					t.Errorf("instance %d: Close() = %v", i, err)
				}
			}
		}
	})
	return set
}

func (set *sharedSet) gone(i int) bool {
	set.mu.Lock()
	defer set.mu.Unlock()
	return set.closed[i]
}

func (set *sharedSet) markGone(i int) {
	set.mu.Lock()
	defer set.mu.Unlock()
	set.closed[i] = true
}

// nowJob returns a job of topic due at due (ready when due <= now).
func nowJob(id, topic string, now, due time.Time) *delayq.Job {
	return newJob(id, topic, delayq.TruncMilli(now), delayq.TruncMilli(due))
}

// eventually polls cond until it holds or sharedWait passes.
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(sharedWait)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, sharedWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tickUntil ticks every open instance at the real clock until the due work
// of jobs is done on one of them or sharedWait passes, and returns how
// many jobs each topic gained over all ticks of all instances.
func tickUntil(t *testing.T, set *sharedSet, want int) map[string]int {
	t.Helper()
	total := map[string]int{}
	got := 0
	eventually(t, fmt.Sprintf("ticks of every instance make %d jobs ready", want), func() (bool, error) {
		for i, s := range set.ss {
			if set.gone(i) {
				continue
			}
			res, err := s.Tick(t.Context(), store.TickParams{Now: time.Now(), Max: 1000})
			if err != nil {
				return false, fmt.Errorf("instance %d: Tick: %w", i, err)
			}
			for topic, n := range res.Ready {
				total[topic] += n
				got += n
			}
		}
		return got >= want, nil
	})
	return total
}

// testSharedSeen: a job put through one instance is read, reserved and
// finished through the other, and every transition is visible to both.
func testSharedSeen(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 2, store.Retention{})
	a, b := set.ss[0], set.ss[1]
	ctx := t.Context()
	now := time.Now()
	j := nowJob("seen", "shared", now, now)
	if err := a.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatalf("A.Put = %v", err)
	}
	got, err := b.Get(ctx, delayq.Ref{ID: "seen"})
	if err != nil || got.Seq != j.Seq || got.State != delayq.StateReady {
		t.Fatalf("B.Get of A's put = %v, %v; want the ready job of seq %d", show(got), err, j.Seq)
	}
	if err := b.Put(ctx, []*delayq.Job{nowJob("seen", "shared", now, now)}); !errors.Is(err, delayq.ErrExists) {
		t.Fatalf("B.Put of an id A holds = %v, want ErrExists", err)
	}
	jobs, err := b.Reserve(ctx, store.ReserveParams{Topics: []string{"shared"}, Max: 1, Now: time.Now()})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("B.Reserve = %d jobs, %v; want A's job", len(jobs), err)
	}
	got, err = a.Get(ctx, delayq.Ref{ID: "seen"})
	if err != nil || got.State != delayq.StateReserved || got.Reservation != jobs[0].Reservation {
		t.Fatalf("A.Get after B's reserve = %v, %v; want reserved under %s", show(got), err, jobs[0].Reservation)
	}
	if _, err := a.Delete(ctx, store.DeleteParams{Ref: held(jobs[0]), Now: time.Now()}); err != nil {
		t.Fatalf("A.Delete with B's reservation = %v", err)
	}
	if _, err := b.Get(ctx, delayq.Ref{ID: "seen"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("B.Get after A finished it = %v, want ErrNotFound", err)
	}
}

// testSharedReserve: consumers on two instances racing for the same
// jobs get each job exactly once.
func testSharedReserve(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 2, store.Retention{})
	ctx := t.Context()
	const n = 200
	now := time.Now()
	for i := 0; i < n; i += 20 {
		var batch []*delayq.Job
		for k := i; k < i+20; k++ {
			batch = append(batch, nowJob(fmt.Sprintf("race%03d", k), "race", now, now))
		}
		if err := set.ss[i/20%2].Put(ctx, batch); err != nil {
			t.Fatalf("Put = %v", err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(s store.Store) {
			defer wg.Done()
			for {
				jobs, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"race"}, Max: 3, Now: time.Now()})
				if err != nil {
					errs <- err
					return
				}
				if len(jobs) == 0 {
					return
				}
				mu.Lock()
				for _, j := range jobs {
					seen[j.ID]++
				}
				mu.Unlock()
			}
		}(set.ss[w%2])
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Reserve = %v", err)
	}
	if len(seen) != n {
		t.Errorf("reserved %d distinct jobs, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("job %s reserved %d times, want once", id, c)
		}
	}
}

// testSharedTick: every instance runs its timer; each due job and each
// expired reservation is moved by exactly one of them, and none is left.
func testSharedTick(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 2, store.Retention{})
	ctx := t.Context()
	now := time.Now()
	const n = 60
	var batch []*delayq.Job
	for k := 0; k < n; k++ {
		// Several topics, so a store that divides timer work by topic
		// gives both instances some.
		batch = append(batch, nowJob(fmt.Sprintf("tick%02d", k), fmt.Sprintf("tick%d", k%6), now, now.Add(50*time.Millisecond)))
	}
	if err := set.ss[0].Put(ctx, batch); err != nil {
		t.Fatalf("Put = %v", err)
	}
	// Both instances tick concurrently, as their timers would, at the
	// real clock: the jobs come due while they tick.
	var wg sync.WaitGroup
	var mu sync.Mutex
	moved := 0
	var tickErr error
	for _, s := range set.ss {
		wg.Add(1)
		go func(s store.Store) {
			defer wg.Done()
			deadline := time.Now().Add(sharedWait)
			for time.Now().Before(deadline) {
				res, err := s.Tick(ctx, store.TickParams{Now: time.Now(), Max: 7})
				mu.Lock()
				if err != nil {
					tickErr = err
				}
				for _, c := range res.Ready {
					moved += c
				}
				done := moved >= n || err != nil
				mu.Unlock()
				if done {
					return
				}
			}
		}(s)
	}
	wg.Wait()
	if tickErr != nil {
		t.Fatalf("Tick = %v", tickErr)
	}
	// A few more ticks on both must find nothing left to move.
	for i, s := range set.ss {
		res, err := s.Tick(ctx, store.TickParams{Now: time.Now(), Max: 1000})
		if err != nil {
			t.Fatalf("instance %d: Tick = %v", i, err)
		}
		for _, c := range res.Ready {
			moved += c
		}
	}
	if moved != n {
		t.Errorf("the instances' ticks made %d jobs ready in all, want exactly %d (each once)", moved, n)
	}
	for k := 0; k < n; k++ {
		j, err := set.ss[1].Get(ctx, delayq.Ref{ID: fmt.Sprintf("tick%02d", k)})
		if err != nil || j.State != delayq.StateReady {
			t.Fatalf("job tick%02d after the ticks = %v, %v; want ready", k, show(j), err)
		}
	}
}

// testSharedDocs: instances racing to write one document (a schedule's
// next tick, a policy) have exactly one winner each round; that is what
// makes a schedule's tick fire once across instances.
func testSharedDocs(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 3, store.Retention{})
	ctx := t.Context()
	var prev uint64
	for round := 0; round < 5; round++ {
		var wg sync.WaitGroup
		wins := make([]*store.Doc, len(set.ss))
		errs := make([]error, len(set.ss))
		for i, s := range set.ss {
			wg.Add(1)
			go func(i int, s store.Store) {
				defer wg.Done()
				d := &store.Doc{Name: "nightly", Rev: store.NewRev(), Data: []byte(fmt.Sprintf(`{"round":%d,"by":%d}`, round, i))}
				if errs[i] = s.SaveDoc(ctx, store.KindSchedule, d, prev); errs[i] == nil {
					wins[i] = d
				}
			}(i, s)
		}
		wg.Wait()
		var winner *store.Doc
		for i, err := range errs {
			switch {
			case err == nil:
				if winner != nil {
					t.Fatalf("round %d: two instances won the same write", round)
				}
				winner = wins[i]
			case !errors.Is(err, store.ErrDocConflict):
				t.Fatalf("round %d: instance %d: SaveDoc = %v, want nil or ErrDocConflict", round, i, err)
			}
		}
		if winner == nil {
			t.Fatalf("round %d: no instance won the write", round)
		}
		for i, s := range set.ss {
			d, err := s.GetDoc(ctx, store.KindSchedule, "nightly")
			if err != nil || d.Rev != winner.Rev || string(d.Data) != string(winner.Data) {
				t.Fatalf("round %d: instance %d reads %v, %v; want the winner's %s", round, i, d, err, winner.Data)
			}
		}
		prev = winner.Rev
	}
}

// testSharedRetained: the retention and idempotency window hold across
// instances: a job finished through one instance is read, and its id
// refused, through the other.
func testSharedRetained(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 2, store.Retention{For: time.Hour})
	a, b := set.ss[0], set.ss[1]
	ctx := t.Context()
	now := time.Now()
	if err := a.Put(ctx, []*delayq.Job{nowJob("kept", "keep", now, now)}); err != nil {
		t.Fatalf("A.Put = %v", err)
	}
	jobs, err := a.Reserve(ctx, store.ReserveParams{Topics: []string{"keep"}, Max: 1, Now: time.Now()})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("A.Reserve = %d jobs, %v", len(jobs), err)
	}
	if _, err := a.Delete(ctx, store.DeleteParams{Ref: held(jobs[0]), Now: time.Now()}); err != nil {
		t.Fatalf("A.Delete (finish) = %v", err)
	}
	got, err := b.Get(ctx, delayq.Ref{ID: "kept"})
	if err != nil || got.State != delayq.StateFinished {
		t.Fatalf("B.Get of the job A finished = %v, %v; want it retained as finished", show(got), err)
	}
	err = b.Put(ctx, []*delayq.Job{nowJob("kept", "keep", now, now)})
	var ee *delayq.ExistsError
	if !errors.As(err, &ee) || ee.State != delayq.StateFinished {
		t.Fatalf("B.Put of the id A finished = %v, want an ExistsError with state finished", err)
	}
}

// testSharedNotify: an instance learns of ready jobs and earlier due
// times made through another (store.Notifier), so its waiters and timer
// react at once instead of polling.
func testSharedNotify(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 2, store.Retention{})
	nb, ok := set.ss[1].(store.Notifier)
	if !ok {
		t.Fatal("a shared store must implement store.Notifier: instances cannot learn of each other's puts otherwise")
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	events, err := nb.Notify(ctx)
	if err != nil {
		t.Fatalf("B.Notify = %v", err)
	}
	// A store that announces ready jobs only to instances waiting on
	// their topic is told that B waits on it, as B's engine would.
	if wm, ok := set.ss[1].(store.WaitMarker); ok {
		if err := wm.MarkWaiting(ctx, []string{"note"}, time.Minute); err != nil {
			t.Fatalf("B.MarkWaiting = %v", err)
		}
	}
	now := time.Now()
	// A subscription may take effect a moment after Notify returns; put
	// until the event arrives, each put a new job.
	var gotReady, gotDue bool
	due := now.Add(time.Hour)
	for i := 0; !(gotReady && gotDue); i++ {
		if i > 0 && time.Since(now) > sharedWait {
			t.Fatalf("events from A's puts: ready %v, due %v; want both within %s", gotReady, gotDue, sharedWait)
		}
		if !gotReady {
			if err := set.ss[0].Put(ctx, []*delayq.Job{nowJob(fmt.Sprintf("ready%d", i), "note", now, now)}); err != nil {
				t.Fatalf("A.Put = %v", err)
			}
		}
		if !gotDue {
			if err := set.ss[0].Put(ctx, []*delayq.Job{nowJob(fmt.Sprintf("later%d", i), "note", now, due)}); err != nil {
				t.Fatalf("A.Put = %v", err)
			}
		}
		timeout := time.After(200 * time.Millisecond)
	drain:
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatal("Notify's channel closed while its context is live")
				}
				if ev.Topic == "note" {
					gotReady = true
				}
				if !ev.Due.IsZero() && !ev.Due.After(due) {
					gotDue = true
				}
			case <-timeout:
				break drain
			}
		}
	}
	cancel()
	for range events { // the channel closes once ctx is done
	}
}

// testSharedMembers: each instance lists the live ones (GET /v1/cluster).
func testSharedMembers(t *testing.T, f SharedFactory) {
	set := newSharedSet(t, f, 2, store.Retention{})
	for i, s := range set.ss {
		c, ok := s.(store.Cluster)
		if !ok {
			t.Fatal("a shared store must implement store.Cluster")
		}
		c.Advertise(fmt.Sprintf("http://127.0.0.1:%d", 17000+i), []string{"http"})
	}
	eventually(t, "every instance lists both", func() (bool, error) {
		for _, s := range set.ss {
			in, err := s.(store.Cluster).Instances(t.Context())
			if err != nil {
				return false, err
			}
			if len(in) != 2 || in[0].URL != "http://127.0.0.1:17000" || in[1].URL != "http://127.0.0.1:17001" {
				return false, nil
			}
		}
		return true, nil
	})
}

// testSharedFailover: when an instance dies without a word (kill -9), the
// timer work it held moves to the live ones: a job due in its share is
// still made ready, and it drops out of the members list.
func testSharedFailover(t *testing.T, f SharedFactory) {
	if f.Crash == nil {
		t.Skip("SharedFactory.Crash is nil")
	}
	set := newSharedSet(t, f, 2, store.Retention{})
	for i, s := range set.ss {
		s.(store.Cluster).Advertise(fmt.Sprintf("http://127.0.0.1:%d", 17100+i), []string{"http"})
	}
	ctx := t.Context()
	f.Crash(t, set.ss[0])
	set.markGone(0)
	now := time.Now()
	const n = 24
	var batch []*delayq.Job
	for k := 0; k < n; k++ {
		// Many topics: whatever share the dead instance held, some of
		// these jobs fall in it.
		batch = append(batch, nowJob(fmt.Sprintf("orphan%02d", k), fmt.Sprintf("orphan%d", k), now, now.Add(100*time.Millisecond)))
	}
	if err := set.ss[1].Put(ctx, batch); err != nil {
		t.Fatalf("Put = %v", err)
	}
	ready := tickUntil(t, set, n)
	total := 0
	for _, c := range ready {
		total += c
	}
	if total != n {
		t.Errorf("the live instance made %d jobs ready, want %d", total, n)
	}
	eventually(t, "the dead instance leaves the members list", func() (bool, error) {
		in, err := set.ss[1].(store.Cluster).Instances(ctx)
		if err != nil {
			return false, err
		}
		return len(in) == 1 && in[0].URL == "http://127.0.0.1:17101", nil
	})
}
