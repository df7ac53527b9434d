package pgstore

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// putDelayed puts one delayed job through the store, due at due.
func putDelayed(t *testing.T, s *Store, id string, now, due time.Time) {
	t.Helper()
	j := &delayq.Job{ID: id, Topic: "orders", State: delayq.StateDelayed, Priority: 1024, Due: due, Created: now,
		Delay: due.Sub(now), TTR: time.Minute, Body: []byte("x")}
	if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
}

// promised reads the timer's promise from the schema's timer table.
func promised(t *testing.T, s *Store) time.Time {
	t.Helper()
	var at time.Time
	if err := s.pool.QueryRow(t.Context(), "SELECT next FROM "+s.Schema()+".timer").Scan(&at); err != nil {
		t.Fatal(err)
	}
	return at
}

// promisedStore opens a store holding the timer lease with one job
// "first" due in an hour, and ticks once at now, which publishes the
// promise; it returns the tick's result too.
func promisedStore(t *testing.T) (s *Store, now, first time.Time, res *store.TickResult) {
	t.Helper()
	s = openStore(t, Options{})
	now = time.Now()
	first = delayq.TruncMilli(now.Add(time.Hour))
	putDelayed(t, s, "first", now, first)
	res, err := s.Tick(t.Context(), store.TickParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	return s, now, first, res
}

// TestSQLPutNotifiesOnlyWhenTheTimerMustAct: once the instance holding
// the timer lease has promised to look again at the earliest due time,
// a job put through SQL due after it sends no NOTIFY (the commit then
// takes no database-wide notify lock), and one due before it does.
func TestSQLPutNotifiesOnlyWhenTheTimerMustAct(t *testing.T) {
	s, _, first, res := promisedStore(t)
	defer s.Close()
	ctx := t.Context()
	if !res.Next.Equal(first) || !promised(t, s).Equal(first) {
		t.Fatalf("after a tick: Next %v, promise %v; want both %v", res.Next, promised(t, s), first)
	}

	listener := appConn(t)
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel(s.Schema())}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	app := appConn(t)
	put := "SELECT job_id FROM " + s.Schema() + ".put('orders', 'x', delay => $1, id => $2)"
	if _, err := app.Exec(ctx, put, 2*time.Hour, "later"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(ctx, put, 10*time.Minute, "sooner"); err != nil {
		t.Fatal(err)
	}
	sooner, err := s.Get(ctx, delayq.Ref{ID: "sooner"})
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	if err != nil {
		t.Fatalf("no NOTIFY for the job due before the promise: %v", err)
	}
	if want := "d " + strconv.FormatInt(sooner.Due.UnixMilli(), 10); n.Payload != want {
		t.Fatalf("first NOTIFY = %q, want %q: the job due after the promise notified too", n.Payload, want)
	}
}

// TestTimerKeepsThePromiseAnOpenPutRead: a put whose transaction read
// the promise, and skipped its NOTIFY, before the timer moved on, is
// still open when the timer would raise the promise past it; the timer
// cannot, and wakes at the old promise instead of sleeping past the
// job. Once the put commits, the next tick raises the promise to it.
func TestTimerKeepsThePromiseAnOpenPutRead(t *testing.T) {
	s, now, first, _ := promisedStore(t)
	defer s.Close()
	ctx := t.Context()
	app := appConn(t)
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT job_id FROM "+s.Schema()+".put('orders', 'x', delay => interval '90 minutes', id => 'open')"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "first"}, Force: true, Now: now}); err != nil {
		t.Fatal(err)
	}
	res, err := s.Tick(ctx, store.TickParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Next.Equal(first) {
		t.Fatalf("tick with the put still open: Next %v, want the old promise %v (else the open put's job is missed)", res.Next, first)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	open, err := s.Get(ctx, delayq.Ref{ID: "open"})
	if err != nil {
		t.Fatal(err)
	}
	res, err = s.Tick(ctx, store.TickParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Next.Equal(open.Due) || !promised(t, s).Equal(open.Due) {
		t.Fatalf("tick after the commit: Next %v, promise %v; want both the committed job's due %v", res.Next, promised(t, s), open.Due)
	}
}

// readyJob is a job ready at once in topic.
func readyJob(id, topic string) *delayq.Job {
	now := time.Now()
	return &delayq.Job{ID: id, Topic: topic, State: delayq.StateReady, Priority: 1024, Due: now, Created: now,
		TTR: time.Minute, Body: []byte("x")}
}

// TestLoneInstanceSendsNoNotify: with no other instance alive, the
// instance's own writes send no NOTIFY (nobody would hear it): the first
// notification a listener sees is the one of a later SQL put.
func TestLoneInstanceSendsNoNotify(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	ctx := t.Context()
	listener := appConn(t)
	if _, err := listener.Exec(ctx, "LISTEN "+pgx.Identifier{channel(s.Schema())}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	if err := s.Put(ctx, []*delayq.Job{readyJob("mine", "lone")}); err != nil {
		t.Fatal(err)
	}
	if _, err := appConn(t).Exec(ctx, "SELECT job_id FROM "+s.Schema()+".put('sql', 'x')"); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	n, err := listener.WaitForNotification(wctx)
	if err != nil {
		t.Fatal(err)
	}
	if n.Payload != "r 1 sql" {
		t.Fatalf("first NOTIFY = %q, want the SQL put's %q: the lone instance notified", n.Payload, "r 1 sql")
	}
}

// TestJoiningInstanceHearsReadyTopics: jobs an instance put while it
// still believed itself alone wake the consumers of an instance that
// joined: once its heartbeat sees the newcomer, it rings every topic with
// ready jobs.
func TestJoiningInstanceHearsReadyTopics(t *testing.T) {
	a := openStore(t, Options{LeaseCheck: 50 * time.Millisecond})
	defer a.Close()
	ctx := t.Context()
	b := openStore(t, Options{URL: a.opt.URL, Schema: a.Schema(), LeaseCheck: 50 * time.Millisecond})
	defer b.Close()
	events, err := b.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	timeout := time.After(10 * time.Second)
	for up := false; !up; { // b's listener is up when it steps its timer
		select {
		case e := <-events:
			up = !e.Due.IsZero()
		case <-timeout:
			t.Fatal("b never listened")
		}
	}
	// a has not met b yet (as between b's start and a's next heartbeat).
	a.meet(nil)
	if err := a.Put(ctx, []*delayq.Job{readyJob("early", "joined")}); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case e := <-events:
			if e.Topic == "joined" {
				return
			}
		case <-timeout:
			t.Fatal("the joining instance never heard of topic joined, whose job was put before the other met it")
		}
	}
}

// TestTimerPromisesAheadWhileJobsFallDue: with a job due sooner than
// promiseAhead, the timer promises now+promiseAhead (it will have ticked
// by then anyway) rather than the job's due time, so jobs falling due
// every millisecond cost a publish every promiseAhead, not every tick;
// it still wakes for the job.
func TestTimerPromisesAheadWhileJobsFallDue(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	now := time.Now()
	soon := delayq.TruncMilli(now.Add(10 * time.Millisecond))
	putDelayed(t, s, "soon", now, soon)
	res, err := s.Tick(t.Context(), store.TickParams{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if want := delayq.TruncMilli(now).Add(promiseAhead); !res.Next.Equal(soon) || !promised(t, s).Equal(want) {
		t.Fatalf("Next %v, promise %v; want Next %v (the job) and promise %v", res.Next, promised(t, s), soon, want)
	}
}

// TestTimerPublishesWhileSQLPutsAreInFlight: application transactions
// calling delayq.put hold the promise's lock shared until they commit,
// and under a steady stream of them one always does. The timer's publish
// used to give up whenever one did, so the promise stayed at none and
// every delayed SQL put sent a NOTIFY (serializing their commits); it
// now waits for the puts in flight to commit.
func TestTimerPublishesWhileSQLPutsAreInFlight(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	s.publishWait = time.Minute // the test commits the put once it sees the wait
	ctx := t.Context()
	now := time.Now()
	first := delayq.TruncMilli(now.Add(time.Hour))
	putDelayed(t, s, "first", now, first)
	app := appConn(t)
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, "SELECT job_id FROM "+s.Schema()+".put('orders', 'x', delay => interval '90 minutes', id => 'inflight')"); err != nil {
		t.Fatal(err)
	}
	type ticked struct {
		res *store.TickResult
		err error
	}
	done := make(chan ticked, 1)
	go func() {
		res, err := s.Tick(ctx, store.TickParams{Now: now})
		done <- ticked{res, err}
	}()
	// The publish waits on the advisory lock the open put holds: commit
	// the put once Postgres shows that wait (or once the tick is over,
	// which is the old code giving up at once).
	waited := false
	for !waited {
		select {
		case r := <-done:
			done <- r
			waited = true
			continue
		default:
		}
		var n int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
			WHERE wait_event_type = 'Lock' AND wait_event = 'advisory' AND datname = current_database()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		waited = n > 0
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	if got := promised(t, s); !got.Equal(first) {
		t.Fatalf("promise after a tick with a SQL put in flight: %v, want the earliest due %v (an unpublished promise makes every delayed SQL put notify)", got, first)
	}
}
