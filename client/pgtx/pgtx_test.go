package pgtx_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/client/pgtx"
	"github.com/delayq/delayq/internal/store/pgstore"
)

// open returns a pgstore on a schema of this test's own (dropped at the
// end) and the database's URL. Without DELAYQ_TEST_POSTGRES the test
// skips, except under CI=true.
func open(t *testing.T) (*pgstore.Store, string) {
	t.Helper()
	url := os.Getenv("DELAYQ_TEST_POSTGRES")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DELAYQ_TEST_POSTGRES is not set; CI must run the Postgres tests")
		}
		t.Skip("DELAYQ_TEST_POSTGRES is not set; run `eval \"$(bash scripts/pg-test-env.sh start)\"`")
	}
	schema := fmt.Sprintf("pgtx_%016x", rand.Uint64())
	s, err := pgstore.Open(t.Context(), pgstore.Options{URL: url, Schema: schema, MaxConns: 2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Close()
		if c, err := pgx.Connect(context.Background(), url); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	return s, url
}

// TestPutTxPgx: a put in a pgx transaction exists only once the
// transaction commits, with every option as given; a taken id fails as
// a Producer's put does.
func TestPutTxPgx(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	put := pgtx.Putter{Schema: s.Schema()}

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := put.PutTx(ctx, tx, "orderclose", []byte("42"), client.ID("orderclose-42")); err != nil {
		t.Fatal(err)
	}
	tx.Rollback(ctx)
	if _, err := s.Get(ctx, delayq.Ref{ID: "orderclose-42"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get after rollback = %v, want ErrNotFound", err)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	id, err := put.PutTx(ctx, tx, "orderclose", []byte("42"), client.ID("orderclose-42"), pgtx.Delay(30*time.Minute),
		client.Priority(7), client.TTR(90*time.Second), client.MaxAttempts(3))
	if err != nil || id != "orderclose-42" {
		t.Fatalf("PutTx = %q, %v", id, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := s.Get(ctx, delayq.Ref{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	if j.State != delayq.StateDelayed || j.Priority != 7 || j.TTR != 90*time.Second || j.MaxAttempts != 3 ||
		j.Delay != 30*time.Minute || string(j.Body) != "42" || j.Topic != "orderclose" {
		t.Fatalf("the committed job = %+v; want delayed 30m, priority 7, ttr 90s, max 3 attempts", j)
	}

	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	_, err = put.PutTx(ctx, tx, "orderclose", []byte("42"), client.ID("orderclose-42"))
	var ee *delayq.ExistsError
	if !errors.As(err, &ee) || ee.State != delayq.StateDelayed || !errors.Is(err, delayq.ErrExists) ||
		client.ExistingState(err) != delayq.StateDelayed {
		t.Fatalf("PutTx of a taken id = %v, want an ExistsError with state delayed", err)
	}
}

// TestPutTxDatabaseSQL: the same put through database/sql, with an id
// made when none is given, At, and a bad topic refused as the server
// refuses it.
func TestPutTxDatabaseSQL(t *testing.T) {
	s, url := open(t)
	ctx := t.Context()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	put := pgtx.Putter{Schema: s.Schema()}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(time.Hour)
	id, err := put.PutTx(ctx, tx, "reminders", []byte("hi"), pgtx.At(at))
	if err != nil || id == "" {
		t.Fatalf("PutTx = %q, %v", id, err)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	j, err := s.Get(ctx, delayq.Ref{ID: id})
	if err != nil || j.State != delayq.StateDelayed || j.Due.Before(delayq.TruncMilli(at)) || j.Due.After(at.Add(time.Second)) {
		t.Fatalf("the job put At %v = %+v, %v; want delayed, due then", at, j, err)
	}

	tx, err = db.BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	_, err = put.PutTx(ctx, tx, "bad topic", []byte("x"))
	var ve *delayq.ValidationError
	if !errors.As(err, &ve) || ve.Code != delayq.CodeBadTopic || !errors.Is(err, delayq.ErrInvalid) {
		t.Fatalf("PutTx into a bad topic = %v, want a ValidationError bad_topic", err)
	}
	if _, err := pgtx.PutTx(ctx, "not a tx", "t", nil); err == nil {
		t.Fatal("PutTx with a string for a transaction = nil error")
	}
}
