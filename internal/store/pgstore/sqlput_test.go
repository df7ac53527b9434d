package pgstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// appConn is an application's own connection to the database, apart
// from the store's pool.
func appConn(t *testing.T) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(t.Context(), pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// drain returns the events already sent or arriving within wait.
func drain(ch <-chan store.Event, wait time.Duration) []store.Event {
	var out []store.Event
	timeout := time.After(wait)
	for {
		select {
		case e := <-ch:
			out = append(out, e)
		case <-timeout:
			return out
		}
	}
}

// TestSQLPutLivesAndDiesWithTheTransaction: a job put through the SQL
// function in a transaction that rolls back never exists, never wakes a
// server and never fires; the same put committed is told to the server
// at commit (a NOTIFY with its due time) and fires when due.
func TestSQLPutLivesAndDiesWithTheTransaction(t *testing.T) {
	s := openStore(t, Options{})
	defer s.Close()
	ctx := t.Context()
	events, err := s.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	app := appConn(t)
	drain(events, 300*time.Millisecond) // the listener's start-up step
	put := "SELECT job_id, job_seq FROM " + s.Schema() + ".put($1, $2, delay => $3, id => $4)"

	tx, err := app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, put, "orders", []byte("close 1"), 50*time.Millisecond, "close-1"); err != nil {
		t.Fatalf("put in a transaction = %v", err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "close-1"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get before commit = %v, want ErrNotFound (not visible outside the transaction)", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	if evs := drain(events, 300*time.Millisecond); len(evs) != 0 {
		t.Fatalf("events after a rolled-back put = %+v, want none", evs)
	}
	time.Sleep(60 * time.Millisecond) // past the rolled-back job's due time
	res, err := s.Tick(ctx, store.TickParams{Now: time.Now()})
	if err != nil || len(res.Ready) != 0 {
		t.Fatalf("Tick after a rolled-back put = %+v, %v; want nothing made ready", res, err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "close-1"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get after rollback = %v, want ErrNotFound", err)
	}

	before := time.Now()
	tx, err = app.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var seq int64
	if err := tx.QueryRow(ctx, put, "orders", []byte("close 1"), 50*time.Millisecond, "close-1").Scan(&id, &seq); err != nil {
		t.Fatalf("put in a transaction = %v", err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := s.Get(ctx, delayq.Ref{ID: "close-1"})
	if err != nil || j.State != delayq.StateDelayed || int64(j.Seq) != seq || string(j.Body) != "close 1" || j.TTR != time.Minute {
		t.Fatalf("Get after commit = %+v, %v; want the delayed job of seq %d", j, err, seq)
	}
	if j.Due.Before(delayq.TruncMilli(before).Add(50 * time.Millisecond)) {
		t.Fatalf("due %v is earlier than put time %v + 50ms", j.Due, before)
	}
	var got bool
	for _, e := range drain(events, time.Second) {
		if e.Due.Equal(j.Due) {
			got = true
		}
	}
	if !got {
		t.Fatal("no event with the committed job's due time: the timer would not learn of it")
	}
	for deadline := time.Now().Add(5 * time.Second); ; {
		res, err := s.Tick(ctx, store.TickParams{Now: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Ready["orders"] == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the committed job never fired")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// pgErr returns err's Postgres error, failing the test without one.
func pgErr(t *testing.T, err error) *pgconn.PgError {
	t.Helper()
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		t.Fatalf("err = %v, want a Postgres error", err)
	}
	return pe
}

// TestSQLPutDuplicateID: a put of an id that a live or retained job
// holds raises SQLSTATE DQ001 with the job's state in DETAIL, and
// changes nothing.
func TestSQLPutDuplicateID(t *testing.T) {
	s := openStore(t, Options{Retention: store.Retention{For: time.Hour}})
	defer s.Close()
	ctx := t.Context()
	app := appConn(t)
	put := "SELECT * FROM " + s.Schema() + ".put('orders', 'x', id => $1)"
	if _, err := app.Exec(ctx, put, "dup"); err != nil {
		t.Fatal(err)
	}
	pe := pgErr(t, func() error { _, err := app.Exec(ctx, put, "dup"); return err }())
	if pe.Code != "DQ001" || pe.Detail != "state=ready" {
		t.Fatalf("second put = %s %q (detail %q), want DQ001 with detail state=ready", pe.Code, pe.Message, pe.Detail)
	}
	jobs, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"orders"}, Max: 1, Now: time.Now()})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "dup", Reservation: jobs[0].Reservation}, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	pe = pgErr(t, func() error { _, err := app.Exec(ctx, put, "dup"); return err }())
	if pe.Code != "DQ001" || pe.Detail != "state=finished" {
		t.Fatalf("put of a finished, retained id = %s (detail %q), want DQ001 with detail state=finished", pe.Code, pe.Detail)
	}
	// The batch form is all or none.
	batch := "SELECT * FROM " + s.Schema() + ".put_batch($1::jsonb)"
	pe = pgErr(t, func() error {
		_, err := app.Exec(ctx, batch, `[{"topic":"orders","body":"a","id":"new1"},{"topic":"orders","body":"b","id":"dup"}]`)
		return err
	}())
	if pe.Code != "DQ001" {
		t.Fatalf("batch with a taken id = %s, want DQ001", pe.Code)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "new1"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get of the batch's other job = %v, want ErrNotFound (all or none)", err)
	}
	rows, err := app.Query(ctx, batch, `[{"topic":"orders","body":"a","id":"new1"},{"topic":"orders","body_base64":"AAE=","delay_ms":60000,"priority":5}]`)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (string, error) {
		var id string
		var seq int64
		return id, r.Scan(&id, &seq)
	})
	if err != nil || len(ids) != 2 || ids[0] != "new1" {
		t.Fatalf("batch put = %v, %v; want 2 ids, the first new1", ids, err)
	}
	j, err := s.Get(ctx, delayq.Ref{ID: ids[1]})
	if err != nil || j.State != delayq.StateDelayed || j.Priority != 5 || string(j.Body) != "\x00\x01" {
		t.Fatalf("the batch's second job = %+v, %v; want delayed, priority 5, body 00 01", j, err)
	}
}

// TestSQLPutValidates: the SQL put checks what the server checks, with
// SQLSTATE DQ002 and the field in DETAIL, and stores nothing.
func TestSQLPutValidates(t *testing.T) {
	s := openStore(t, Options{MaxBody: 10})
	defer s.Close()
	ctx := t.Context()
	app := appConn(t)
	put := "SELECT * FROM " + s.Schema() + ".put($1, $2, delay => $3, id => $4, ttr => $5, priority => $6)"
	for _, c := range []struct {
		name  string
		args  []any
		field string
	}{
		{"topic with a space", []any{"bad topic", []byte("x"), time.Duration(0), nil, time.Minute, 1}, "topic"},
		{"topic starting with -", []any{"-t", []byte("x"), time.Duration(0), nil, time.Minute, 1}, "topic"},
		{"long topic", []any{strings.Repeat("t", 201), []byte("x"), time.Duration(0), nil, time.Minute, 1}, "topic"},
		{"id with a slash", []any{"t", []byte("x"), time.Duration(0), "a/b", time.Minute, 1}, "id"},
		{"body over max_body", []any{"t", []byte("12345678901"), time.Duration(0), nil, time.Minute, 1}, "body"},
		{"negative delay", []any{"t", []byte("x"), -time.Second, nil, time.Minute, 1}, "delay"},
		{"ttr under 1s", []any{"t", []byte("x"), time.Duration(0), nil, 500 * time.Millisecond, 1}, "ttr"},
		{"priority over 2^32-1", []any{"t", []byte("x"), time.Duration(0), nil, time.Minute, int64(1) << 32}, "priority"},
	} {
		_, err := app.Exec(ctx, put, c.args...)
		pe := pgErr(t, err)
		if pe.Code != "DQ002" || pe.Detail != "field="+c.field {
			t.Errorf("%s: %s %q (detail %q), want DQ002 with detail field=%s", c.name, pe.Code, pe.Message, pe.Detail, c.field)
		}
	}
	ts, err := s.Topics(ctx)
	if err != nil || len(ts) != 0 {
		t.Fatalf("Topics after refused puts = %v, %v; want none", ts, err)
	}
}

// TestSQLPutFreesAnExpiredID: the id of a retained job whose retention
// ran out (not yet removed by the timer) is free for a SQL put, which
// replaces the old row; within the retention it is taken.
func TestSQLPutFreesAnExpiredID(t *testing.T) {
	s := openStore(t, Options{Retention: store.Retention{For: time.Minute}})
	defer s.Close()
	ctx := t.Context()
	app := appConn(t)
	put := "SELECT job_seq FROM " + s.Schema() + ".put('orders', 'x', id => $1)"
	for _, c := range []struct {
		id    string
		ended time.Duration // before now
		taken bool
	}{{"old", time.Hour, false}, {"recent", time.Second, true}} {
		if _, err := app.Exec(ctx, put, c.id); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: c.id}, Force: true, Now: time.Now().Add(-c.ended)}); err != nil {
			t.Fatal(err)
		}
		var seq int64
		err := app.QueryRow(ctx, put, c.id).Scan(&seq)
		if c.taken {
			if pe := pgErr(t, err); pe.Code != "DQ001" || pe.Detail != "state=deleted" {
				t.Fatalf("put of %s, retained %v ago = %s %q, want DQ001 state=deleted", c.id, c.ended, pe.Code, pe.Detail)
			}
			continue
		}
		if err != nil {
			t.Fatalf("put of %s, whose retention ran out = %v, want a new job", c.id, err)
		}
		j, err := s.Get(ctx, delayq.Ref{ID: c.id})
		if err != nil || j.State != delayq.StateReady || int64(j.Seq) != seq {
			t.Fatalf("Get(%s) = %+v, %v; want the new ready job of seq %d", c.id, j, err, seq)
		}
	}
}
