package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
)

func TestPolicyCommands(t *testing.T) {
	srv := startServer(t)
	code, out, errOut := run(t, "policy", "set", "orders", "--server", srv, "--ttr", "30s", "--max-attempts", "3",
		"--backoff", "1s", "--backoff-max", "10m", "--backoff-jitter", "0.1", "--max-jobs", "100")
	if want := "topic orders: ttr 30s, max_attempts 3, backoff 1s ×2 up to 10m0s ±10%, max_jobs 100\n"; code != 0 || out != want {
		t.Fatalf("policy set = %d %q %q, want %q", code, out, errOut, want)
	}
	code, out, _ = run(t, "policy", "get", "orders", "--server", srv, "--json")
	var p api.Policy
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || p.MaxJobs != 100 || p.Backoff == nil || p.Backoff.Factor != 2 {
		t.Fatalf("policy get --json = %d %q", code, out)
	}
	// A put without a ttr takes the policy's.
	code, out, _ = run(t, "put", "orders", "x", "--server", srv, "--json")
	var put api.PutResponse
	if code != 0 || json.Unmarshal([]byte(out), &put) != nil {
		t.Fatalf("put = %d %q", code, out)
	}
	code, out, _ = run(t, "get", put.ID, "--server", srv, "--json")
	var j api.Job
	if code != 0 || json.Unmarshal([]byte(out), &j) != nil || j.TTR != 30 || j.MaxAttempts != 3 {
		t.Fatalf("get of a job put under the policy = %d %q", code, out)
	}

	// Bad input: the server's named refusal, or a usage error.
	code, _, errOut = run(t, "policy", "set", "orders", "--server", srv, "--backoff", "1s", "--backoff-factor", "0.5")
	if code != 1 || !strings.Contains(errOut, "backoff.factor") {
		t.Fatalf("policy set factor 0.5 = %d %q", code, errOut)
	}
	code, _, errOut = run(t, "policy", "set", "orders", "--server", srv, "--backoff-jitter", "0.5")
	if code != 2 || !strings.Contains(errOut, "need --backoff") {
		t.Fatalf("policy set jitter without backoff = %d %q", code, errOut)
	}
	code, _, errOut = run(t, "policy", "set", "orders", "--server", srv)
	if code != 1 || !strings.Contains(errOut, "sets nothing") {
		t.Fatalf("policy set of nothing = %d %q", code, errOut)
	}

	code, out, _ = run(t, "policy", "delete", "orders", "--server", srv)
	if code != 0 || out != "deleted the policy of topic orders\n" {
		t.Fatalf("policy delete = %d %q", code, out)
	}
	code, _, errOut = run(t, "policy", "get", "orders", "--server", srv)
	if code != 1 || !strings.Contains(errOut, "has no policy") {
		t.Fatalf("policy get after delete = %d %q", code, errOut)
	}
}
