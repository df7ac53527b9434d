package pgstore

import (
	"context"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/storetest"
)

// pgURL returns the test database's URL. Without it the test skips,
// except under CI=true, where a missing Postgres is a failure.
func pgURL(t testing.TB) string {
	t.Helper()
	v := os.Getenv("DELAYQ_TEST_POSTGRES")
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DELAYQ_TEST_POSTGRES is not set; CI must run the Postgres tests (eval \"$(bash scripts/pg-test-env.sh start)\")")
		}
		t.Skip("DELAYQ_TEST_POSTGRES is not set; run `eval \"$(bash scripts/pg-test-env.sh start)\"` to run the Postgres tests")
	}
	return v
}

// schemas holds migrated schemas that finished tests emptied, for the
// next test to take: a migration costs most of a second, emptying a
// schema a few milliseconds.
var schemas struct {
	sync.Mutex
	free []string
	all  []string
}

// freshSchema names an empty schema of this test's own (migrated already
// when one is free, else new) and empties it for the next test when the
// test ends, so tests share one database and stay independent.
func freshSchema(t testing.TB, url string) string {
	t.Helper()
	schemas.Lock()
	var schema string
	if n := len(schemas.free); n > 0 {
		schema, schemas.free = schemas.free[n-1], schemas.free[:n-1]
	} else {
		schema = "t" + nonce()
		schemas.all = append(schemas.all, schema)
	}
	schemas.Unlock()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Logf("empty schema %s: %v", schema, err)
			return
		}
		defer c.Close(ctx)
		var exists bool
		if err := c.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", schema+".jobs").Scan(&exists); err != nil || !exists {
			return // never migrated (or a test dropped it): not reusable
		}
		// DELETE, not TRUNCATE: a test's few rows go faster than
		// TRUNCATE's new files for every table and index.
		_, err = c.Exec(ctx, "DELETE FROM "+schema+".jobs; DELETE FROM "+schema+".counts; DELETE FROM "+schema+".pauses; DELETE FROM "+schema+".docs; DELETE FROM "+
			schema+".series; DELETE FROM "+schema+".instances; DELETE FROM "+schema+".timer; ALTER SEQUENCE "+schema+".job_seq RESTART")
		if err != nil {
			t.Logf("empty schema %s: %v", schema, err)
			return
		}
		schemas.Lock()
		schemas.free = append(schemas.free, schema)
		schemas.Unlock()
	})
	return schema
}

// TestMain drops the tests' schemas when they are done.
func TestMain(m *testing.M) {
	code := m.Run()
	if url := os.Getenv("DELAYQ_TEST_POSTGRES"); url != "" && len(schemas.all) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if c, err := pgx.Connect(ctx, url); err == nil {
			for _, s := range schemas.all {
				_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+s+" CASCADE")
			}
			c.Close(ctx)
		}
		cancel()
	}
	os.Exit(code)
}

// openStore opens a store on a fresh schema unless opt names one.
func openStore(t testing.TB, opt Options) *Store {
	t.Helper()
	if opt.URL == "" {
		opt.URL = pgURL(t)
	}
	if opt.Schema == "" {
		opt.Schema = freshSchema(t, opt.URL)
	}
	if opt.Logger == nil {
		opt.Logger = quiet()
	}
	if opt.MaxConns == 0 {
		opt.MaxConns = 4
	}
	s, err := Open(t.Context(), opt)
	if err != nil {
		t.Fatalf("Open(%s) = %v", opt.Schema, err)
	}
	// Closed before freshSchema's cleanup recycles the schema, also when
	// the test stops early: a store left open keeps trying for the
	// schema's timer lease, and the next test given the schema never
	// gets it (its Ticks then move nothing).
	t.Cleanup(func() { s.Close() })
	return s
}

func factory() storetest.Factory {
	return storetest.Factory{
		Open: func(t *testing.T) store.Store { return openStore(t, Options{}) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			ps := s.(*Store)
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			return openStore(t, Options{Schema: ps.opt.Schema, Retention: ps.opt.Retention})
		},
		OpenRetaining: func(t *testing.T, r store.Retention) store.Store {
			return openStore(t, Options{Retention: r})
		},
		HandsOff: true,
	}
}

func TestConformance(t *testing.T) {
	pgURL(t)
	storetest.Run(t, factory())
}

// sharedFactory opens instances of one deployment on one fresh schema,
// with short lease checks, for storetest.RunShared.
func sharedFactory() storetest.SharedFactory {
	return storetest.SharedFactory{
		Open: func(t *testing.T, n int, r store.Retention) []store.Store {
			url := pgURL(t)
			schema := freshSchema(t, url)
			out := make([]store.Store, n)
			for i := range out {
				out[i] = openStore(t, Options{URL: url, Schema: schema, Retention: r, LeaseCheck: 300 * time.Millisecond,
					InstanceID: "shared" + strconv.Itoa(i)})
			}
			return out
		},
		Crash: func(t *testing.T, s store.Store) { s.(*Store).abandon() },
	}
}

// abandon stops s as kill -9 stops its process: its loops end and its
// connections close with nothing handed back (no unlock, no goodbye):
// Postgres frees the lease when it sees the sessions end, and the
// instance's heartbeat row stays until it is stale.
func (s *Store) abandon() {
	s.cancel()
	s.wg.Wait()
	s.lease.mu.Lock()
	if s.lease.conn != nil {
		_ = s.lease.conn.PgConn().Conn().Close() // the socket, without a Terminate message
		s.lease.conn, s.lease.held = nil, false
	}
	s.lease.mu.Unlock()
	s.fan.Close()
	s.pool.Close()
}

func TestShared(t *testing.T) {
	pgURL(t)
	storetest.RunShared(t, sharedFactory())
}

// quiet is a logger that drops everything.
func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
