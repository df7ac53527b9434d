package pgstore

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestNewerSchemaRefusesToStart: a schema a newer delayq migrated is
// refused with a message saying so, and left as it is.
func TestNewerSchemaRefusesToStart(t *testing.T) {
	s := openStore(t, Options{})
	schema := s.Schema()
	s.Close()
	app := appConn(t)
	next := SchemaVersion() + 1
	if _, err := app.Exec(t.Context(), "INSERT INTO "+schema+".schema_version (version) VALUES ($1)", next); err != nil {
		t.Fatal(err)
	}
	app2 := appConn(t) // its cleanup runs after the one below
	t.Cleanup(func() {
		app2.Exec(context.Background(), "DELETE FROM "+schema+".schema_version WHERE version = $1", next)
	})
	_, err := Open(t.Context(), Options{URL: pgURL(t), Schema: schema, Logger: s.log})
	if err == nil || !strings.Contains(err.Error(), "newer than this delayq knows") || !strings.Contains(err.Error(), "upgrade delayq") {
		t.Fatalf("Open of a schema at version %d = %v, want a refusal saying it is newer", next, err)
	}
}

// TestDownAtStart: a database that does not answer fails Open after
// its retries with ErrUnavailable and a message naming the host, never
// the password.
func TestDownAtStart(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	var logs bytes.Buffer
	_, err = Open(t.Context(), Options{URL: "postgres://delayq:s3cret-pw@" + addr + "/jobs?sslmode=disable",
		ConnectTimeout: 600 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err == nil || !errors.Is(err, delayq.ErrUnavailable) {
		t.Fatalf("Open of a closed port = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), addr) || strings.Contains(err.Error(), "s3cret") {
		t.Fatalf("Open's error %q: want the host %s named and no password", err, addr)
	}
	if n := strings.Count(logs.String(), "retrying"); n < 2 || !strings.Contains(logs.String(), addr) || strings.Contains(logs.String(), "s3cret") {
		t.Fatalf("Open logged %d retries: want at least 2 (100 ms, then 200 ms, within 600 ms), naming %s without the password; log:\n%s", n, addr, logs.String())
	}
	if got := Redact("postgres://delayq:s3cret-pw@h:5432/db?password=other"); strings.Contains(got, "s3cret") || strings.Contains(got, "other") {
		t.Fatalf("Redact = %q, still holds a password", got)
	}
	if got := Redact("host=h user=u password=s3cret dbname=d"); strings.Contains(got, "s3cret") {
		t.Fatalf("Redact = %q, still holds a password", got)
	}
}

// TestMissingPrivilegeNamed: a role that may not write the jobs table is
// refused at start with the privilege named, not at its first put.
func TestMissingPrivilegeNamed(t *testing.T) {
	s := openStore(t, Options{})
	schema := s.Schema()
	s.Close()
	app := appConn(t)
	role := "r" + nonce()
	ctx := t.Context()
	for _, q := range []string{
		"CREATE ROLE " + role + " LOGIN",
		"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA " + schema + " TO " + role,
		"GRANT USAGE ON SEQUENCE " + schema + ".job_seq TO " + role,
		"REVOKE DELETE ON " + schema + ".jobs FROM " + role,
	} {
		if _, err := app.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	app2 := appConn(t) // its cleanup runs after the one below
	t.Cleanup(func() {
		ctx, app := context.Background(), app2
		app.Exec(ctx, "REVOKE ALL ON ALL TABLES IN SCHEMA "+schema+" FROM "+role)
		app.Exec(ctx, "REVOKE ALL ON SEQUENCE "+schema+".job_seq FROM "+role)
		app.Exec(ctx, "REVOKE ALL ON SCHEMA "+schema+" FROM "+role)
		app.Exec(ctx, "DROP ROLE "+role)
	})
	cfg, err := pgx.ParseConfig(pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	url := strings.Replace(pgURL(t), "://"+cfg.User+"@", "://"+role+"@", 1)
	_, err = Open(ctx, Options{URL: url, Schema: schema, Logger: quiet()})
	if err == nil || !strings.Contains(err.Error(), "DELETE on table "+schema+".jobs") {
		t.Fatalf("Open as a role without DELETE = %v, want the missing privilege named", err)
	}
	// With it granted the same role starts: it needs no CREATE once the
	// schema is migrated.
	if _, err := app.Exec(ctx, "GRANT DELETE ON "+schema+".jobs TO "+role); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, Options{URL: url, Schema: schema, Logger: quiet()})
	if err != nil {
		t.Fatalf("Open with every privilege = %v", err)
	}
	s2.Close()
}

// TestPrintedMigrationIsWhatOpenApplies: the SQL `delayq migrate
// --print` writes, run by hand, leaves a schema Open takes as current.
func TestPrintedMigrationIsWhatOpenApplies(t *testing.T) {
	url := pgURL(t)
	schema := "t" + nonce() // new, never migrated
	app := appConn(t)
	t.Cleanup(func() { app.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	sql, err := MigrationSQL(schema, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(t.Context(), sql); err != nil {
		t.Fatalf("running the printed SQL: %v", err)
	}
	from, err := Migrate(t.Context(), Options{URL: url, Schema: schema, Logger: quiet()})
	if err != nil || from != SchemaVersion() {
		t.Fatalf("Migrate after the printed SQL = from %d, %v; want from %d (nothing left to do)", from, err, SchemaVersion())
	}
	s := openStore(t, Options{URL: url, Schema: schema})
	s.Close()
	if _, err := MigrationSQL("bad-name", 0); err == nil {
		t.Fatal("MigrationSQL of a schema name with '-' = nil error")
	}
}

// TestStatementTimeoutReported: a statement cut off by
// statement_timeout fails with ErrUnavailable naming the timeout.
func TestStatementTimeoutReported(t *testing.T) {
	s := openStore(t, Options{StatementTimeout: 200 * time.Millisecond})
	defer s.Close()
	_, err := s.pool.Exec(t.Context(), "SELECT pg_sleep(2)")
	err = s.fail("sleep", err)
	if !errors.Is(err, delayq.ErrUnavailable) || !strings.Contains(err.Error(), "statement_timeout (200ms)") {
		t.Fatalf("a 2 s statement under a 200ms timeout = %v, want ErrUnavailable naming statement_timeout", err)
	}
}

// TestTopicStatsMatchesTopics: the one-topic counts (read from the
// states' indexes) are the topic's entry of Topics, and an unknown topic
// has zero counts.
func TestTopicStatsMatchesTopics(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	job := func(id string, prio uint32, due time.Time) *delayq.Job {
		st := delayq.StateReady
		if due.After(now) {
			st = delayq.StateDelayed
		}
		return &delayq.Job{ID: id, Topic: "stats", Body: []byte("x"), Priority: prio, TTR: time.Minute, State: st, Due: due, Created: now}
	}
	if err := s.Put(ctx, []*delayq.Job{job("a", 1, now), job("b", 2000, now.Add(-time.Second)), job("c", 1024, now),
		job("d", 1024, now.Add(time.Hour)), job("e", 1024, now)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"stats"}, Max: 1, Now: now}); err != nil {
		t.Fatal(err)
	}
	all, err := s.Topics(ctx)
	if err != nil || len(all) != 1 {
		t.Fatalf("Topics = %v, %v", all, err)
	}
	one, err := s.TopicStats(ctx, "stats")
	if err != nil || one != all[0] {
		t.Fatalf("TopicStats = %+v, %v; want Topics' %+v", one, err, all[0])
	}
	if one.Ready != 3 || one.Reserved != 1 || one.Delayed != 1 || one.Urgent != 0 || !one.OldestReady.Equal(now.Add(-time.Second)) {
		t.Fatalf("TopicStats = %+v; want 3 ready (none urgent: the urgent one is reserved), 1 reserved, 1 delayed, oldest ready a second ago", one)
	}
	if z, err := s.TopicStats(ctx, "none"); err != nil || z != (delayq.TopicStats{Name: "none"}) {
		t.Fatalf("TopicStats of an unknown topic = %+v, %v", z, err)
	}
}

// TestSessionsKilledWhileServing: when Postgres ends every session of an
// instance (a restart, a failover, a DBA's pg_terminate_backend), calls
// fail with ErrUnavailable, never a raw driver error, and the instance
// comes back by itself: the pool reconnects, and the timer lease is
// taken again.
func TestSessionsKilledWhileServing(t *testing.T) {
	s := openStore(t, Options{LeaseCheck: 100 * time.Millisecond})
	defer s.Close()
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	j := &delayq.Job{ID: "k", Topic: "kill", Body: []byte("x"), TTR: time.Minute, State: delayq.StateDelayed, Due: now.Add(time.Millisecond), Created: now}
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	app := appConn(t)
	var n int
	if err := app.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1",
		"delayq/"+s.InstanceID()).Scan(&n); err != nil || n < 2 {
		t.Fatalf("terminated %d sessions (%v), want the pool's, the lease's and the listener's", n, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		res, err := s.Tick(ctx, store.TickParams{Now: time.Now()})
		if err != nil && !errors.Is(err, delayq.ErrUnavailable) {
			t.Fatalf("Tick after the sessions ended = %v, want ErrUnavailable or success", err)
		}
		if err == nil && res.Ready["kill"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the instance never fired its due job again after its sessions ended")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "k"}); err != nil {
		t.Fatalf("Get once back = %v", err)
	}
}
