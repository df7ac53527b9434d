package cli

import (
	"strings"
	"testing"
)

// TestConsumerAndOperatorCommands drives touch, release, bury, update and
// list against a real server, each checked through get or list.
func TestConsumerAndOperatorCommands(t *testing.T) {
	t.Parallel()
	srv := "--server=" + startServer(t)
	mustRun(t, "put", srv, "mail", "hello", "--id", "m1", "--ttr", "1m")
	mustRun(t, "put", srv, "mail", "later", "--id", "m2", "--delay", "1h")

	res := fields(mustRun(t, "reserve", srv, "mail"))["reservation"]
	if res == "" {
		t.Fatal("reserve printed no reservation")
	}
	if out := mustRun(t, "touch", srv, "m1", "--reservation", res); !strings.HasPrefix(out, "touched job m1: deadline in ") {
		t.Errorf("touch printed %q", out)
	}
	if code, _, errOut := run(t, "touch", srv, "m1", "--reservation", "1-9"); code != exitError || !strings.Contains(errOut, "not reserved") {
		t.Errorf("touch with a wrong reservation: exit %d %q, want 1 and not reserved", code, errOut)
	}
	if out := mustRun(t, "release", srv, "m1", "--reservation", res, "--delay", "10m", "--priority", "3"); !strings.HasPrefix(out, "released job m1: delayed, due in 9m59") && out != "released job m1: delayed, due in 10m0s\n" {
		t.Errorf("release printed %q", out)
	}
	if got := fields(mustRun(t, "get", srv, "m1")); got["state"] != "delayed" || got["priority"] != "3" {
		t.Errorf("after release --delay 10m --priority 3: state %q priority %q", got["state"], got["priority"])
	}

	got := fields(mustRun(t, "update", srv, "m1", "--delay", "0s", "--body", "hi again"))
	if got["state"] != "ready" || got["body"] != `"hi again"` {
		t.Errorf("update --delay 0s --body: state %q body %s, want ready and the new body", got["state"], got["body"])
	}
	if code, _, errOut := run(t, "update", srv, "m1"); code != exitUsage || !strings.Contains(errOut, "nothing to change") {
		t.Errorf("update with no change: exit %d %q, want a usage error", code, errOut)
	}

	res = fields(mustRun(t, "reserve", srv, "mail"))["reservation"]
	if out := mustRun(t, "bury", srv, "m1", "--reservation", res, "--reason", "card declined"); out != "buried job m1\n" {
		t.Errorf("bury printed %q", out)
	}
	if got := fields(mustRun(t, "get", srv, "m1")); !strings.HasPrefix(got["failed"], `"card declined" `) ||
		got["counts"] != "0 timeouts, 1 releases, 1 buries, 0 kicks" {
		t.Errorf("get after bury --reason: failed %q, counts %q", got["failed"], got["counts"])
	}

	out := mustRun(t, "list", srv, "mail")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "m2 ") || !strings.Contains(lines[1], "delayed") ||
		!strings.HasPrefix(lines[2], "m1 ") || !strings.Contains(lines[2], "buried") || !strings.Contains(lines[2], `"card declined"`) {
		t.Errorf("list printed:\n%s\nwant a header, m2 delayed, then m1 buried", out)
	}
	out = mustRun(t, "list", srv, "mail", "--limit", "1")
	if !strings.Contains(out, "m2 ") || strings.Contains(out, "m1 ") || !strings.Contains(out, "more: --cursor ") {
		t.Errorf("list --limit 1 printed:\n%s\nwant m2 and a cursor for the rest", out)
	}
	cursor := out[strings.Index(out, "--cursor ")+len("--cursor "):]
	if out := mustRun(t, "list", srv, "mail", "--limit", "1", "--cursor", strings.TrimSpace(cursor)); !strings.Contains(out, "m1 ") || strings.Contains(out, "more:") {
		t.Errorf("list of the second page printed:\n%s\nwant m1 and no cursor", out)
	}
	if out := mustRun(t, "list", srv, "mail", "--state", "ready"); out != "no jobs\n" {
		t.Errorf("list --state ready printed %q, want no jobs", out)
	}
	if code, _, _ := run(t, "list", srv, "mail", "--state", "sleeping"); code != exitUsage {
		t.Errorf("list --state sleeping: exit %d, want a usage error", code)
	}
}
