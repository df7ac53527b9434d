package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// queued is how many puts wait in s's line for a group.
func queued(s *Store) int {
	return s.line.l.Waiting()
}

// holdPuts makes the next write to s's jobs table wait: another session
// holds a SHARE lock on it (an insert needs ROW EXCLUSIVE) until release
// commits. So the first put stays in flight while the test lines others
// up behind it.
func holdPuts(t *testing.T, s *Store) (release func()) {
	t.Helper()
	ctx := t.Context()
	c, err := pgx.Connect(ctx, s.opt.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Exec(ctx, "BEGIN; LOCK TABLE "+s.q.jobs+" IN SHARE MODE"); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	release = func() {
		once.Do(func() {
			if _, err := c.Exec(context.WithoutCancel(ctx), "COMMIT"); err != nil {
				t.Error(err)
			}
			c.Close(context.WithoutCancel(ctx))
		})
	}
	t.Cleanup(release)
	return release
}

// lockWaiters is how many of s's sessions wait for a lock in Postgres.
func lockWaiters(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	err := s.pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name = $1",
		"delayq/"+s.opt.InstanceID).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitFor polls cond (a count read from the store or Postgres) until it
// holds, failing after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// puts runs Put calls in goroutines, each started once the one before it
// is in flight (waiting on the held table in Postgres, or in s's line),
// so the calls line up in the order given.
type puts struct {
	t    *testing.T
	s    *Store
	wg   sync.WaitGroup
	errs []*error     // each call's answer, once wg is done
	n    atomic.Int32 // calls started
}

// err is the answer of the call start numbered i.
func (p *puts) err(i int) error { return *p.errs[i] }

func (p *puts) start(ctx context.Context, jobs ...*delayq.Job) int {
	p.t.Helper()
	i := len(p.errs)
	e := new(error)
	p.errs = append(p.errs, e)
	p.wg.Add(1)
	p.n.Add(1)
	go func() {
		defer p.wg.Done()
		*e = p.s.Put(ctx, jobs)
	}()
	waitFor(p.t, fmt.Sprintf("put %d in flight", i), func() bool {
		return lockWaiters(p.t, p.s)+queued(p.s) == int(p.n.Load())
	})
	return i
}

// fill puts one job per group slot, named prefix0, prefix1, ..., each
// in flight (held in Postgres), so that the puts started after them wait
// in s's line.
func (p *puts) fill(ctx context.Context, prefix string) {
	p.t.Helper()
	for i := range groupsInFlight {
		p.start(ctx, readyJob(fmt.Sprintf("%s%d", prefix, i), "t"))
	}
}

// xmin is the transaction that inserted the job with id.
func xmin(t *testing.T, s *Store, id string) string {
	t.Helper()
	var x string
	if err := s.pool.QueryRow(t.Context(), "SELECT xmin::text FROM "+s.q.jobs+" WHERE id = $1", id).Scan(&x); err != nil {
		t.Fatalf("xmin of %s: %v", id, err)
	}
	return x
}

// TestConcurrentPutsShareOneCommit: puts that arrive while another is
// being written go out together, as one transaction (one commit), in the
// order they arrived; each put wrote its own transaction before.
func TestConcurrentPutsShareOneCommit(t *testing.T) {
	const n = 8
	s := openStore(t, Options{MaxConns: n + groupsInFlight + 4})
	defer s.Close()
	release := holdPuts(t, s)
	p := &puts{t: t, s: s}
	p.fill(t.Context(), "hold")
	for i := range n {
		p.start(t.Context(), readyJob(fmt.Sprintf("j%d", i), "t"))
	}
	release()
	p.wg.Wait()
	for i := range p.errs {
		if err := p.err(i); err != nil {
			t.Fatalf("put %d = %v", i, err)
		}
	}
	// The puts in flight went alone; the n that waited behind them, in
	// one transaction, with seqs in their order of arrival.
	txs := map[string]bool{}
	var last uint64
	for i := range n {
		id := fmt.Sprintf("j%d", i)
		txs[xmin(t, s, id)] = true
		j, err := s.Get(t.Context(), delayq.Ref{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		if j.Seq <= last {
			t.Errorf("%s has seq %d, not after the put before it (%d)", id, j.Seq, last)
		}
		last = j.Seq
	}
	if len(txs) != 1 {
		t.Errorf("%d puts waiting together committed in %d transactions, want 1", n, len(txs))
	}
	if got, want := topics(t, s), truth(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Topics() = %v, want %v", got, want)
	}
}

// TestGroupAnswersEachPut: in one group, every put gets its own answer:
// a taken id (live, or retained within the idempotency window) fails
// only its own put, with the taken job's state; an id whose retention
// ran out is free again; a put of several jobs with one taken id stores
// none of them; two puts of one id, the second fails as taken by the
// first; the others' jobs commit together. A row the database refuses
// fails only its own put, and one whose caller gives up while it waits
// is never written.
func TestGroupAnswersEachPut(t *testing.T) {
	now := time.Now()
	var clock atomic.Pointer[time.Time]
	clock.Store(&now)
	s := openStore(t, Options{MaxConns: 16, Retention: store.Retention{For: time.Hour, Now: func() time.Time { return *clock.Load() }}})
	defer s.Close()
	ctx := t.Context()
	for _, id := range []string{"live", "live2", "done", "old"} {
		if err := s.Put(ctx, []*delayq.Job{readyJob(id, "t")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "old"}, Now: now.Add(-2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "done"}, Now: now}); err != nil {
		t.Fatal(err)
	}
	done, err := s.Get(ctx, delayq.Ref{ID: "done"})
	if err != nil || !done.State.Retained() {
		t.Fatalf("Get(done) = %v, %v; want a retained job", done, err)
	}

	release := holdPuts(t, s)
	p := &puts{t: t, s: s}
	p.fill(ctx, "first")
	cases := []struct {
		jobs  []*delayq.Job
		taken string       // the id the put must fail on, "" for none
		state delayq.State // and its state
	}{
		{jobs: []*delayq.Job{readyJob("a", "t")}},
		{jobs: []*delayq.Job{readyJob("live", "t")}, taken: "live", state: delayq.StateReady},
		{jobs: []*delayq.Job{readyJob("done", "t")}, taken: "done", state: done.State},
		{jobs: []*delayq.Job{readyJob("old", "u")}},
		{jobs: []*delayq.Job{readyJob("b", "t"), readyJob("live2", "t")}, taken: "live2", state: delayq.StateReady},
		{jobs: []*delayq.Job{readyJob("c", "u")}},
		{jobs: []*delayq.Job{readyJob("c", "t")}, taken: "c", state: delayq.StateReady},
	}
	at := make([]int, len(cases))
	for i, c := range cases {
		at[i] = p.start(ctx, c.jobs...)
	}
	release()
	p.wg.Wait()
	for i, c := range cases {
		err := p.err(at[i])
		var ee *delayq.ExistsError
		switch {
		case c.taken == "" && err != nil:
			t.Errorf("put %d (%s) = %v, want nil", i, c.jobs[0].ID, err)
		case c.taken != "" && !errors.As(err, &ee):
			t.Errorf("put %d (%s) = %v, want an ExistsError", i, c.jobs[0].ID, err)
		case c.taken != "" && (ee.ID != c.taken || ee.State != c.state):
			t.Errorf("put %d: ExistsError{%q, %q}, want {%q, %q}", i, ee.ID, ee.State, c.taken, c.state)
		}
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "b"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get(b) = %v: a put with a taken id stored another of its jobs", err)
	}
	if j, err := s.Get(ctx, delayq.Ref{ID: "old"}); err != nil || j.Topic != "u" || j.State != delayq.StateReady {
		t.Errorf("Get(old) = %+v, %v; want the new ready job in u", j, err)
	}
	if x, y, z := xmin(t, s, "a"), xmin(t, s, "old"), xmin(t, s, "c"); x != y || y != z {
		t.Errorf("the group's new jobs committed in transactions %s, %s, %s; want one", x, y, z)
	}
	if got, want := topics(t, s), truth(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Topics() = %v, want %v", got, want)
	}

	// A row the table refuses (its CHECK on state) fails the group's
	// statement; the group is written again put by put, and only that
	// put fails. A put whose caller gave up in line is not written.
	release = holdPuts(t, s)
	p = &puts{t: t, s: s}
	p.fill(ctx, "second")
	bad := readyJob("bad", "t")
	bad.State = "bogus"
	gone, cancel := context.WithCancel(ctx)
	x, b, quit, y := p.start(ctx, readyJob("x", "t")), p.start(ctx, bad), p.start(gone, readyJob("quit", "t")), p.start(ctx, readyJob("y", "t"))
	cancel()
	waitFor(t, "the cancelled put to leave the line", func() bool { return queued(s) == 3 })
	release()
	p.wg.Wait()
	if p.err(x) != nil || p.err(y) != nil {
		t.Errorf("the good puts beside a bad row: %v, %v; want nil", p.err(x), p.err(y))
	}
	if !errors.Is(p.err(b), delayq.ErrUnavailable) {
		t.Errorf("the bad row's put = %v, want ErrUnavailable", p.err(b))
	}
	if !errors.Is(p.err(quit), context.Canceled) {
		t.Errorf("the cancelled put = %v, want context.Canceled", p.err(quit))
	}
	for id, want := range map[string]error{"x": nil, "y": nil, "bad": delayq.ErrNotFound, "quit": delayq.ErrNotFound} {
		if _, err := s.Get(ctx, delayq.Ref{ID: id}); !errors.Is(err, want) {
			t.Errorf("Get(%s) = %v, want %v", id, err, want)
		}
	}
	if got, want := topics(t, s), truth(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Topics() = %v, want %v", got, want)
	}
}

// TestGroupLosingARaceAnswersEachPut: a group whose snapshot did not see
// an id an application's transaction was putting at the same time fails
// on the unique index when that transaction commits; its puts are then
// written one by one, so only the put of that id fails, as taken.
func TestGroupLosingARaceAnswersEachPut(t *testing.T) {
	s := openStore(t, Options{MaxConns: 8})
	defer s.Close()
	ctx := t.Context()
	put := "SELECT * FROM " + s.Schema() + ".put('t', 'x', id => $1)"
	var apps [2]pgx.Tx
	for i := range apps {
		tx, err := appConn(t).Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		apps[i] = tx
	}
	for i := range groupsInFlight {
		if _, err := apps[0].Exec(ctx, put, fmt.Sprintf("y%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := apps[1].Exec(ctx, put, "z"); err != nil {
		t.Fatal(err)
	}
	p := &puts{t: t, s: s}
	p.fill(ctx, "y") // each waits for apps[0]'s job of its id
	z, w := p.start(ctx, readyJob("z", "t")), p.start(ctx, readyJob("w", "t"))
	if err := apps[0].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// z and w in flight together, z waiting for apps[1]'s z.
	waitFor(t, "the group of z and w to wait for the application's z", func() bool {
		return queued(s) == 0 && lockWaiters(t, s) == 1
	})
	if err := apps[1].Commit(ctx); err != nil {
		t.Fatal(err)
	}
	p.wg.Wait()
	answers := map[string]int{"z": z}
	for i := range groupsInFlight {
		answers[fmt.Sprintf("y%d", i)] = i
	}
	for name, i := range answers {
		var ee *delayq.ExistsError
		if err := p.err(i); !errors.As(err, &ee) || ee.ID != name || ee.State != delayq.StateReady {
			t.Errorf("put of %s, which the application committed first = %v, want ExistsError{%s, ready}", name, err, name)
		}
	}
	if err := p.err(w); err != nil {
		t.Errorf("put of w, in the group that lost the race = %v, want nil", err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "w"}); err != nil {
		t.Errorf("Get(w) = %v", err)
	}
	if got, want := topics(t, s), truth(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("Topics() = %v, want %v", got, want)
	}
}
