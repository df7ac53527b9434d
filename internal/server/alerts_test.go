package server

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/client"
)

// alertsDir holds the shipped Prometheus rules and Grafana dashboard.
const alertsDir = "../../docs/alerts"

// TestPrometheusRules runs promtool over the shipped rules: they parse
// (check rules) and each alert fires on its series and not before
// (test rules, prometheus-rules.test.yaml). scripts/deps.sh installs
// promtool; under CI its absence is a failure, not a skip.
func TestPrometheusRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("promtool not found; scripts/deps.sh installs it (Debian package prometheus)")
		}
		t.Skip("promtool not found; run scripts/deps.sh")
	}
	for _, args := range [][]string{
		{"check", "rules", "prometheus-rules.yaml"},
		{"test", "rules", "prometheus-rules.test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = alertsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// metricRE finds delayq metric names in rules, queries and exposition.
var metricRE = regexp.MustCompile(`\bdelayq_[a-z0-9_]*[a-z0-9]`)

// exported is the metric family names in an exposition text: the names
// of its samples with histogram suffixes kept, so a query for
// x_bucket matches.
func exported(text string) []string {
	var names []string
	for _, line := range strings.Split(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name := line[:strings.IndexAny(line, "{ ")]
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// TestAlertMetricNamesExported: every delayq metric the shipped rules
// and Grafana dashboard query is one a real server exports, once it has
// done each kind of work (puts, reserves, finishes, releases, buries,
// a TTR expiry, a schedule tick, a gRPC call).
func TestAlertMetricNamesExported(t *testing.T) {
	s := startServer(t, testConfig(t), &syncBuffer{})
	defer http.DefaultClient.CloseIdleConnections()
	c := newClient(t, s)
	ctx := context.Background()
	if code, body := do(t, s, "PUT", "/v1/schedules/beat", `{"topic":"beats","every":"100ms"}`); code != http.StatusCreated {
		t.Fatalf("PUT schedule = %d %s", code, body)
	}
	if _, err := c.Put(ctx, "work", client.PutRequest{ID: "w", Body: []byte("x"), TTR: time.Second}); err != nil {
		t.Fatal(err)
	}
	reserve := func() string {
		t.Helper()
		js, err := c.Reserve(ctx, []string{"work"}, 1, 5*time.Second)
		if err != nil || len(js) != 1 {
			t.Fatalf("Reserve = %v, %v", js, err)
		}
		return js[0].Reservation
	}
	if _, err := c.Release(ctx, "w", reserve(), 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bury(ctx, "w", reserve(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KickJob(ctx, "w"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, "w", reserve()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Put(ctx, "work", client.PutRequest{ID: "w2", Body: []byte("x"), TTR: time.Second}); err != nil {
		t.Fatal(err)
	}
	reserve()
	// A call of the gRPC API (Connect's JSON over HTTP/1.1), which the
	// gRPC rule and panels query.
	if code, body := do(t, s, "POST", "/delayq.v1.DelayQService/Get", `{"id":"w2"}`); code != http.StatusOK {
		t.Fatalf("Connect Get = %d %s", code, body)
	}
	var text string
	waitUntil(t, "a TTR expiry, a schedule tick and the gRPC call in /metrics", func() bool {
		text = scrape(t, s)
		return strings.Contains(text, `delayq_ttr_expired_total{topic="work"}`) && strings.Contains(text, "delayq_schedule_ticks_total{") &&
			strings.Contains(text, "delayq_grpc_request_duration_seconds_count{")
	})
	have := exported(text)
	for _, file := range []string{"prometheus-rules.yaml", "grafana-dashboard.json"} {
		b, err := os.ReadFile(filepath.Join(alertsDir, file))
		if err != nil {
			t.Fatal(err)
		}
		refs := metricRE.FindAllString(string(b), -1)
		if len(refs) < 5 {
			t.Fatalf("%s names only %v", file, refs)
		}
		for _, name := range refs {
			if !slices.Contains(have, name) {
				t.Errorf("%s queries %s, which the server does not export", file, name)
			}
		}
	}
}
