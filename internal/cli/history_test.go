package cli

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// startRetainingServer serves the HTTP API over a real socket from an
// engine on a store that keeps ended jobs for an hour (--retain 1h).
func startRetainingServer(t *testing.T) string {
	t.Helper()
	st := memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour, Bodies: true}})
	log := slog.New(slog.DiscardHandler)
	e := engine.New(st, engine.Config{Logger: log})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	srv := httptest.NewServer(httpapi.NewHandler(e, httpapi.Options{Logger: log}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
	})
	return srv.URL
}

// TestRetainedJobCommands: delayq get shows a finished job with when it
// ended and its attempts, delayq list --state finished lists it, and a
// put of its id is refused naming its state.
func TestRetainedJobCommands(t *testing.T) {
	t.Parallel()
	srv := "--server=" + startRetainingServer(t)
	mustRun(t, "put", srv, "mail", "hello", "--id", "mail-1")
	res := fields(mustRun(t, "reserve", srv, "mail"))
	mustRun(t, "release", srv, "mail-1", "--reservation", res["reservation"], "--reason", "smtp 451")
	res = fields(mustRun(t, "reserve", srv, "mail"))
	mustRun(t, "finish", srv, "mail-1", "--reservation", res["reservation"])
	// The same finish again (its answer lost) succeeds: finishing is
	// idempotent while the job is kept as finished.
	if out := mustRun(t, "finish", srv, "mail-1", "--reservation", res["reservation"]); out != "finished job mail-1\n" {
		t.Errorf("finish sent again printed %q, want finished job mail-1", out)
	}

	out := mustRun(t, "get", srv, "mail-1")
	got := fields(out)
	if got["state"] != "finished" || !strings.Contains(got["ended"], "ago") || got["body"] != `"hello"` {
		t.Errorf("get of a finished job: state %q, ended %q, body %q; want finished, when it ended, its body\n%s", got["state"], got["ended"], got["body"], out)
	}
	_, table, _ := strings.Cut(out, "attempts:\n")
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "released") || !strings.Contains(lines[1], `"smtp 451"`) ||
		!strings.Contains(lines[2], "finished") || !strings.Contains(lines[1], "http 127.0.0.1:") {
		t.Errorf("get's attempts table = %q, want a header, attempt 1 released (\"smtp 451\") and attempt 2 finished, by the client's address", table)
	}

	out = mustRun(t, "list", srv, "mail", "--state", "finished")
	if !strings.Contains(out, "ENDED") || !strings.Contains(out, "mail-1") || !strings.Contains(out, "finished") {
		t.Errorf("list --state finished = %q, want mail-1 with when it ended", out)
	}
	if out := mustRun(t, "list", srv, "mail"); out != "no jobs\n" {
		t.Errorf("list of the live states = %q, want no jobs", out)
	}
	code, _, errOut := run(t, "put", srv, "mail", "hello", "--id", "mail-1")
	if code != exitError || !strings.Contains(errOut, `"mail-1" already exists (finished)`) {
		t.Errorf("put of a finished job's id: exit %d, stderr %q; want 1, already exists (finished)", code, errOut)
	}
}
