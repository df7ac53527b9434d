package server

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/client/pgtx"
)

// postgresSchema returns the test database's URL and a schema of the
// test's own, dropped at the end; it skips when DELAYQ_TEST_POSTGRES is
// unset (a failure under CI).
func postgresSchema(t *testing.T) (url, schema string) {
	t.Helper()
	url = os.Getenv("DELAYQ_TEST_POSTGRES")
	if url == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DELAYQ_TEST_POSTGRES is not set; scripts/test.sh starts a PostgreSQL for the tests")
		}
		t.Skip("DELAYQ_TEST_POSTGRES not set; run scripts/test.sh or scripts/pg-test-env.sh")
	}
	schema = fmt.Sprintf("srv_%016x", rand.Uint64())
	t.Cleanup(func() {
		if c, err := pgx.Connect(context.Background(), url); err == nil {
			c.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	return url, schema
}

// TestOrderCloseOverPostgres is the headline use end to end: a server
// started with --postgres; a consumer long-polls through HTTP; the
// application writes its order and puts the close job in one
// transaction. The job of a rolled-back order never reaches the
// consumer; the committed one does, once due, with no polling of the
// table (the put's NOTIFY wakes the timer).
func TestOrderCloseOverPostgres(t *testing.T) {
	url, schema := postgresSchema(t)
	cfg := testConfig(t)
	cfg.Postgres, cfg.PostgresSchema, cfg.DataDir = url, schema, ""
	logs := &syncBuffer{}
	s := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start(--postgres) = %v", err)
	}
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	c := newClient(t, s)
	ctx := t.Context()
	app, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(context.Background())
	if _, err := app.Exec(ctx, "CREATE TABLE "+schema+".orders (id int PRIMARY KEY, paid bool NOT NULL DEFAULT false)"); err != nil {
		t.Fatal(err)
	}
	put := pgtx.Putter{Schema: schema}
	order := func(id int, commit bool) {
		tx, err := app.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".orders (id) VALUES ($1)", id); err != nil {
			t.Fatal(err)
		}
		if _, err := put.PutTx(ctx, tx, "orderclose", []byte(fmt.Sprint(id)), client.ID(fmt.Sprintf("orderclose-%d", id)),
			pgtx.Delay(300*time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = tx.Commit(ctx)
		} else {
			err = tx.Rollback(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	got := make(chan string, 2)
	go func() {
		// The second long-poll is short: it only shows that nothing
		// more comes.
		for _, wait := range []time.Duration{10 * time.Second, time.Second} {
			jobs, err := c.Reserve(context.Background(), []string{"orderclose"}, 1, wait)
			if err != nil || len(jobs) == 0 {
				got <- fmt.Sprintf("none (%v)", err)
				continue
			}
			got <- jobs[0].ID
		}
	}()
	waitUntil(t, "the consumer parked", func() bool { return s.Engine().Waiting("orderclose") == 1 })
	order(1, false) // rolled back: its close job must never come
	order(2, true)
	if id := <-got; id != "orderclose-2" {
		t.Fatalf("the consumer got %s, want orderclose-2 (the committed order's job)", id)
	}
	if id := <-got; id != "none (<nil>)" {
		t.Fatalf("a second reserve got %s, want nothing: the rolled-back order's job must not exist", id)
	}
}
