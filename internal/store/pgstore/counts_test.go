package pgstore

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// truth is every topic's counts as a GROUP BY over the live jobs reads
// them, with the oldest ready job: what the counts table must add up to.
func truth(t *testing.T, s *Store) []delayq.TopicStats {
	t.Helper()
	rows, err := s.pool.Query(t.Context(), `SELECT topic,
		count(*) FILTER (WHERE state = 'ready'), count(*) FILTER (WHERE state = 'delayed'),
		count(*) FILTER (WHERE state = 'reserved'), count(*) FILTER (WHERE state = 'buried'),
		count(*) FILTER (WHERE state = 'ready' AND priority < 1024), min(due) FILTER (WHERE state = 'ready')
		FROM `+s.q.jobs+` WHERE ended IS NULL GROUP BY topic ORDER BY topic`)
	if err != nil {
		t.Fatal(err)
	}
	out := []delayq.TopicStats{}
	for rows.Next() {
		var st delayq.TopicStats
		var oldest *time.Time
		if err := rows.Scan(&st.Name, &st.Ready, &st.Delayed, &st.Reserved, &st.Buried, &st.Urgent, &oldest); err != nil {
			t.Fatal(err)
		}
		st.OldestReady = fromPtr(oldest)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func topics(t *testing.T, s *Store) []delayq.TopicStats {
	t.Helper()
	ts, err := s.Topics(t.Context())
	if err != nil {
		t.Fatalf("Topics() = %v", err)
	}
	return ts
}

// slots counts the rows of the counts table, and those not in slot 0.
func slots(t *testing.T, s *Store) (rows, session int) {
	t.Helper()
	err := s.pool.QueryRow(t.Context(), "SELECT count(*), count(*) FILTER (WHERE slot <> 0) FROM "+
		pgx.Identifier{s.opt.Schema}.Sanitize()+".counts").Scan(&rows, &session)
	if err != nil {
		t.Fatal(err)
	}
	return rows, session
}

// TestTopicsReadsNoJobRowPerJob: the statement Topics runs reads a
// bounded number of rows of the jobs table and its indexes (one probe per
// topic with ready jobs for the oldest), however many jobs there are; a
// GROUP BY over the live jobs read every one of them. Counted with the
// transaction's own table statistics (pg_stat_get_xact_*), exact in the
// session that runs the statement.
func TestTopicsReadsNoJobRowPerJob(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	ctx := t.Context()
	now := time.Now()
	const n = 3000
	var jobs []*delayq.Job
	for i := range n {
		j := readyJob(fmt.Sprintf("j%d", i), []string{"a", "b", "c"}[i%3])
		if i%2 == 1 {
			j.State, j.Due = delayq.StateDelayed, now.Add(time.Hour)
		}
		jobs = append(jobs, j)
	}
	for c := range slices.Chunk(jobs, 1000) {
		if err := s.Put(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.pool.Exec(ctx, "ANALYZE "+s.q.jobs); err != nil {
		t.Fatal(err)
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	read := func() int64 {
		var r int64
		err := tx.QueryRow(ctx, `SELECT sum(pg_stat_get_xact_tuples_returned(c.oid) + pg_stat_get_xact_tuples_fetched(c.oid))::bigint
			FROM pg_class c WHERE c.oid = $1::regclass OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = $1::regclass)`,
			s.q.jobs).Scan(&r)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := read()
	rows, err := tx.Query(ctx, s.q.topics)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for rows.Next() {
		got++
	}
	if rows.Err() != nil {
		t.Fatal(rows.Err())
	}
	if d := read() - before; d > 3*2 {
		t.Fatalf("Topics statement read %d rows of the jobs table and its indexes with %d jobs in 3 topics, want at most %d", d, n, 3*2)
	}
	if got != 3 {
		t.Fatalf("Topics statement returned %d rows, want 3", got)
	}
	if diff := cmp.Diff(truth(t, s), topics(t, s)); diff != "" {
		t.Fatalf("Topics() differs from the live jobs (-want +got):\n%s", diff)
	}
}

// TestSQLPutCounted: jobs put with the SQL function are counted when the
// application's transaction commits (urgent ones too), and not at all
// when it rolls back.
func TestSQLPutCounted(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	ctx := t.Context()
	app := appConn(t)
	put := "SELECT " + s.Schema() + ".put($1, 'x'::bytea, delay => $2, priority => $3)"
	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		delay time.Duration
		prio  int64
	}{{0, 10}, {0, 1024}, {time.Hour, 10}} {
		if _, err := tx.Exec(ctx, put, "sql", p.delay, p.prio); err != nil {
			t.Fatal(err)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, put, "sql", time.Duration(0), int64(1)); err != nil {
		t.Fatal(err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	want := truth(t, s)
	if len(want) != 1 || want[0].Ready != 2 || want[0].Urgent != 1 || want[0].Delayed != 1 {
		t.Fatalf("live jobs = %+v, want 2 ready (1 urgent), 1 delayed", want)
	}
	if diff := cmp.Diff(want, topics(t, s)); diff != "" {
		t.Fatalf("Topics() after SQL puts (-want +got):\n%s", diff)
	}
	st, err := s.TopicStats(ctx, "sql")
	if err != nil || !cmp.Equal(st, want[0]) {
		t.Fatalf("TopicStats(sql) = %+v, %v; want %+v", st, err, want[0])
	}
}

// TestCountsFoldKeepsTotals: puts and transitions on several sessions
// leave session rows; the fold moves them into slot 0 and drops topics
// left at zero, and Topics answers the same before and after, and after
// a restart. Folds run while writers write, and the counts still add up.
func TestCountsFoldKeepsTotals(t *testing.T) {
	s := openStore(t, Options{})
	ctx := t.Context()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				topic := []string{"f", "g", "gone"}[i%3]
				j := readyJob(fmt.Sprintf("w%d-%d", w, i), topic)
				j.Priority = uint32(1000 + 10*(i%5))
				if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
					t.Error(err)
					return
				}
				got, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{topic}, Max: 1, Now: time.Now(), By: "w"})
				if err != nil {
					t.Error(err)
					return
				}
				for _, r := range got {
					if topic == "gone" || i%2 == 0 {
						_, err = s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: r.Seq, Reservation: r.Reservation}, Now: time.Now()})
					} else {
						_, err = s.Bury(ctx, store.BuryParams{Ref: delayq.Ref{Seq: r.Seq, Reservation: r.Reservation}, Now: time.Now()})
					}
					if err != nil {
						t.Error(err)
						return
					}
				}
			}
		}()
	}
	stop := make(chan struct{})
	folded := make(chan int)
	go func() { // folds while the writers write
		n := 0
		defer func() { folded <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.fold(ctx); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	wg.Wait()
	close(stop)
	if n := <-folded; n == 0 {
		t.Fatal("no fold ran while the writers wrote")
	}
	if t.Failed() {
		return
	}
	// A reserve sees the jobs committed when it starts; when those were
	// all held by other workers' reserves it finds none, and a gone job
	// put just after is left. Finish what is left, so gone has no live
	// job.
	for {
		got, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"gone"}, Max: 10, Now: time.Now(), By: "w"})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) == 0 {
			break
		}
		for _, r := range got {
			if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: r.Seq, Reservation: r.Reservation}, Now: time.Now()}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// One more write on each of several sessions: session rows to fold.
	for i := range 3 {
		if err := s.Put(ctx, []*delayq.Job{readyJob(fmt.Sprintf("late%d", i), "g")}); err != nil {
			t.Fatal(err)
		}
	}
	want := truth(t, s)
	if slices.ContainsFunc(want, func(st delayq.TopicStats) bool { return st.Name == "gone" }) {
		t.Fatalf("live jobs = %+v: topic gone should have none", want)
	}
	if diff := cmp.Diff(want, topics(t, s)); diff != "" {
		t.Fatalf("Topics() before the fold (-want +got):\n%s", diff)
	}
	if _, session := slots(t, s); session == 0 {
		t.Fatal("no session rows before the fold")
	}
	if err := s.fold(ctx); err != nil {
		t.Fatal(err)
	}
	if rows, session := slots(t, s); session != 0 || rows != len(want) {
		t.Fatalf("after the fold: %d rows, %d not in slot 0; want %d (one per live topic), 0", rows, session, len(want))
	}
	if diff := cmp.Diff(want, topics(t, s)); diff != "" {
		t.Fatalf("Topics() after the fold (-want +got):\n%s", diff)
	}
	schema := s.opt.Schema
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openStore(t, Options{Schema: schema})
	defer s.Close()
	if diff := cmp.Diff(want, topics(t, s)); diff != "" {
		t.Fatalf("Topics() after a restart (-want +got):\n%s", diff)
	}
}

// TestMigrationBackfillsCounts: a schema at version 2 with live and
// retained jobs, upgraded by Open, counts what it holds.
func TestMigrationBackfillsCounts(t *testing.T) {
	url := pgURL(t)
	schema := fmt.Sprintf("dq_v2_%d", time.Now().UnixNano())
	app := appConn(t)
	ctx := t.Context()
	t.Cleanup(func() { app.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	if _, err := app.Exec(ctx, "CREATE SCHEMA "+schema+"; CREATE TABLE "+schema+
		".schema_version (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())"); err != nil {
		t.Fatal(err)
	}
	for _, m := range migrations()[:2] {
		if _, err := app.Exec(ctx, render(m.sql, schema)); err != nil {
			t.Fatal(err)
		}
		if _, err := app.Exec(ctx, "INSERT INTO "+schema+".schema_version (version) VALUES ($1)", m.version); err != nil {
			t.Fatal(err)
		}
	}
	for i, q := range []string{"put('m', 'x', priority => 5)", "put('m', 'x')", "put('m', 'x', delay => '1 hour')", "put('n', 'x')"} {
		if _, err := app.Exec(ctx, "SELECT "+schema+"."+q); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	// A retained job and a reserved one, as a version-2 server leaves them.
	if _, err := app.Exec(ctx, "UPDATE "+schema+".jobs SET state = 'finished', ended = now(), expires = now() + interval '1 hour' WHERE topic = 'n'"); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(ctx, "UPDATE "+schema+".jobs SET state = 'reserved', deadline = now() + interval '1 hour' WHERE topic = 'm' AND priority = 1024 AND state = 'ready'"); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, Options{URL: url, Schema: schema})
	defer s.Close()
	want := truth(t, s)
	if len(want) != 1 || want[0].Ready != 1 || want[0].Urgent != 1 || want[0].Reserved != 1 || want[0].Delayed != 1 {
		t.Fatalf("live jobs = %+v, want m: 1 ready (urgent), 1 reserved, 1 delayed", want)
	}
	if diff := cmp.Diff(want, topics(t, s)); diff != "" {
		t.Fatalf("Topics() after the migration (-want +got):\n%s", diff)
	}
}
