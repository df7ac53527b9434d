package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/config"
)

func TestAlarmCommands(t *testing.T) {
	// The alarm names a loopback URL, which webhooks may reach only when
	// allowed.
	srv := startServer(t, func(c *config.Config) { c.WebhookAllowNets = []string{"127.0.0.0/8"} })
	code, out, errOut := run(t, "alarm", "set", "dead", "--server", srv, "--url", "http://127.0.0.1:1/hook",
		"--topic", "orders.*", "--topic", "mail", "--buried-over", "3", "--oldest-ready-over", "5m", "--repeat", "10m")
	if code != 0 || !strings.Contains(out, "buried_over=3 oldest_ready_over=5m0s") || !strings.Contains(out, "orders.*,mail") {
		t.Fatalf("alarm set = %d %q %q", code, out, errOut)
	}
	code, out, errOut = run(t, "alarm", "set", "slow", "--server", srv, "--url", "https://example.com/x",
		"--lateness-p99-over", "1s", "--failures-per-min-over", "2.5", "--json")
	var a api.Alarm
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || *a.When.FailuresPerMinOver != 2.5 || a.State != "ok" {
		t.Fatalf("alarm set --json = %d %q %q", code, out, errOut)
	}
	code, out, errOut = run(t, "alarm", "set", "signed", "--server", srv, "--url", "https://example.com/x", "--buried-over", "0",
		"--format", "alertmanager", "--secret", "s3cret", "--header", "X-Team=payments", "--header", "Authorization=Bearer r", "--json")
	if code != 0 || json.Unmarshal([]byte(out), &a) != nil || a.Format != "alertmanager" || a.Secret != api.SecretMask ||
		a.Headers["X-Team"] != "payments" || a.Headers["Authorization"] != "Bearer r" || strings.Contains(out, "s3cret") {
		t.Fatalf("alarm set --format --secret --header = %d %q %q", code, out, errOut)
	}
	if code, _, errOut = run(t, "alarm", "set", "x", "--server", srv, "--url", "http://h/", "--buried-over", "1", "--header", "Host=evil"); code != 1 || !strings.Contains(errOut, "Host cannot be set") {
		t.Fatalf("alarm set --header Host=... = %d %q", code, errOut)
	}
	if code, _, _ = run(t, "alarm", "set", "x", "--server", srv, "--url", "http://h/", "--buried-over", "1", "--format", "pagerduty"); code != 2 {
		t.Fatalf("alarm set --format pagerduty = %d, want 2", code)
	}
	code, out, _ = run(t, "alarm", "list", "--server", srv)
	if code != 0 || !strings.Contains(out, "dead") || !strings.Contains(out, "slow") || strings.Index(out, "dead") > strings.Index(out, "slow") {
		t.Fatalf("alarm list = %d %q", code, out)
	}
	if code, out, _ = run(t, "alarm", "get", "dead", "--server", srv); code != 0 || !strings.Contains(out, "repeat  10m0s") {
		t.Fatalf("alarm get = %d %q", code, out)
	}
	if code, out, _ = run(t, "alarm", "delete", "dead", "--server", srv); code != 0 || !strings.Contains(out, "deleted alarm dead") {
		t.Fatalf("alarm delete = %d %q", code, out)
	}
	if code, _, errOut = run(t, "alarm", "get", "dead", "--server", srv); code != 1 || !strings.Contains(errOut, "not found") {
		t.Fatalf("alarm get of a deleted alarm = %d %q", code, errOut)
	}
	// Bad input is refused by the server with its named code.
	if code, _, errOut = run(t, "alarm", "set", "x", "--server", srv, "--url", "ftp://h/", "--buried-over", "1"); code != 1 || !strings.Contains(errOut, "scheme") {
		t.Fatalf("alarm set ftp:// = %d %q", code, errOut)
	}
	if code, _, errOut = run(t, "alarm", "set", "x", "--server", srv, "--url", "http://h/"); code != 1 || !strings.Contains(errOut, "at least one") {
		t.Fatalf("alarm set without a condition = %d %q", code, errOut)
	}
	if code, _, _ = run(t, "alarm", "set", "x", "--server", srv); code != 2 {
		t.Fatalf("alarm set without --url = %d, want 2", code)
	}
}
