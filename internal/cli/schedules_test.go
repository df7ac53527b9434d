package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
)

func TestScheduleCommands(t *testing.T) {
	srv := startServer(t)
	code, out, errOut := run(t, "schedule", "add", "nightly", "--server", srv, "--topic", "reports",
		"--cron", "0 30 2 * * *", "--timezone", "Europe/Berlin", "--missed", "one", "--body", "run")
	if code != 0 || !strings.Contains(out, "0 30 2 * * *") {
		t.Fatalf("schedule add = %d %q %q", code, out, errOut)
	}
	if !strings.Contains(out, "Europe/Berlin") || !strings.Contains(out, "next") {
		t.Fatalf("schedule add printed %q; want the zone and next fire times", out)
	}

	code, out, errOut = run(t, "schedule", "add", "beat", "--server", srv, "--topic", "pings", "--every", "90s", "--json")
	var s api.Schedule
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Cron != "@every 1m30s" || len(s.Next) != 5 {
		t.Fatalf("schedule add --json = %d %q %q", code, out, errOut)
	}

	code, out, _ = run(t, "schedule", "list", "--server", srv)
	if code != 0 || !strings.Contains(out, "beat") || !strings.Contains(out, "nightly") || strings.Index(out, "beat") > strings.Index(out, "nightly") {
		t.Fatalf("schedule list = %d %q", code, out)
	}

	code, out, _ = run(t, "schedule", "pause", "beat", "--server", srv, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || !s.Paused {
		t.Fatalf("schedule pause = %d %q", code, out)
	}
	code, out, _ = run(t, "schedule", "resume", "beat", "--server", srv, "--json")
	if code != 0 || json.Unmarshal([]byte(out), &s) != nil || s.Paused {
		t.Fatalf("schedule resume = %d %q", code, out)
	}
	code, out, _ = run(t, "schedule", "get", "beat", "--server", srv)
	if code != 0 || !strings.Contains(out, "@every 1m30s") || !strings.Contains(out, "last") {
		t.Fatalf("schedule get = %d %q", code, out)
	}

	code, out, _ = run(t, "schedule", "delete", "beat", "--server", srv)
	if code != 0 || !strings.Contains(out, "deleted schedule beat") {
		t.Fatalf("schedule delete = %d %q", code, out)
	}
	code, _, errOut = run(t, "schedule", "get", "beat", "--server", srv)
	if code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("schedule get of a deleted schedule = %d %q", code, errOut)
	}

	// Bad input is refused by the server with its named code.
	code, _, errOut = run(t, "schedule", "add", "feb", "--server", srv, "--topic", "t", "--cron", "0 0 0 31 2 *")
	if code != 1 || !strings.Contains(errOut, "never fires") {
		t.Fatalf("schedule add Feb 31 = %d %q", code, errOut)
	}
	// Neither or both of --cron and --every is a usage error.
	if code, _, errOut = run(t, "schedule", "add", "x", "--server", srv, "--topic", "t"); code != 2 || !strings.Contains(errOut, "--cron SPEC or --every DURATION") {
		t.Fatalf("schedule add without timing = %d %q, want 2 asking for --cron or --every", code, errOut)
	}
	if code, _, errOut = run(t, "schedule", "add", "x", "--server", srv, "--topic", "t", "--cron", "@daily", "--every", "1s"); code != 2 || !strings.Contains(errOut, "--cron and --every can't be used together") {
		t.Fatalf("schedule add with both timings = %d %q, want 2", code, errOut)
	}
	// The usage line marks neither as required: one of them is.
	_, help, _ := run(t, "schedule", "add", "--help")
	if usage, _, _ := strings.Cut(help, "\n"); strings.Contains(usage, "--cron") || strings.Contains(usage, "--every") {
		t.Errorf("schedule add's usage line %q marks --cron or --every as required", usage)
	}
}

func TestPauseResumeCommands(t *testing.T) {
	srv := startServer(t)
	if code, _, errOut := run(t, "put", "orders", "x", "--server", srv); code != 0 {
		t.Fatalf("put = %d %s", code, errOut)
	}
	code, out, errOut := run(t, "pause", "orders", "--for", "10m", "--server", srv)
	if code != 0 || out != "paused topic orders for 10m0s (1 ready)\n" {
		t.Fatalf("pause = %d %q %q", code, out, errOut)
	}
	if code, out, _ = run(t, "reserve", "orders", "--server", srv); code != 0 || !strings.Contains(out, "no job ready") {
		t.Fatalf("reserve from a paused topic = %d %q", code, out)
	}
	if code, out, _ = run(t, "resume", "orders", "--server", srv); code != 0 || out != "resumed topic orders (1 ready)\n" {
		t.Fatalf("resume = %d %q", code, out)
	}
	if code, out, _ = run(t, "reserve", "orders", "--server", srv); code != 0 || strings.Contains(out, "no job ready") {
		t.Fatalf("reserve after resume = %d %q", code, out)
	}
	if code, out, _ = run(t, "pause", "orders", "--server", srv); code != 0 || !strings.Contains(out, "until resumed") {
		t.Fatalf("pause without --for = %d %q", code, out)
	}
}

func TestPurgeCommand(t *testing.T) {
	srv := startServer(t)
	for _, d := range []string{"1h", "2h"} {
		if code, _, errOut := run(t, "put", "orders", "x", "--delay", d, "--server", srv); code != 0 {
			t.Fatalf("put = %d %s", code, errOut)
		}
	}
	if code, _, errOut := run(t, "purge", "orders", "--state", "delayed", "--server", srv); code != 2 || !strings.Contains(errOut, "--yes") {
		t.Fatalf("purge without --yes = %d %q", code, errOut)
	}
	code, out, errOut := run(t, "purge", "orders", "--state", "delayed", "--yes", "--server", srv)
	if code != 0 || out != "deleted 2 delayed jobs from topic orders\n" {
		t.Fatalf("purge = %d %q %q", code, out, errOut)
	}
}
