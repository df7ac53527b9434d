package server

import (
	"net/http"
	"strings"
	"testing"
)

// Without --webhook-allow-nets, an alarm whose URL is the server's own
// API on loopback, or a cloud's metadata address, is refused when it is
// created, with a 400 bad_url that names the flag; with the flag naming
// loopback it is taken.
func TestWebhookToInternalAddressRefused(t *testing.T) {
	cfg := testConfig(t)
	cfg.WebhookAllowNets = nil
	s := startServer(t, cfg, &syncBuffer{})
	for _, u := range []string{s.URL() + "/v1/topics/t/jobs", "http://169.254.169.254/latest/meta-data/", "http://[::1]:9/"} {
		code, body := do(t, s, "PUT", "/v1/alarms/inward", `{"url":"`+u+`","when":{"buried_over":0}}`)
		if code != http.StatusBadRequest || !strings.Contains(body, `"bad_url"`) || !strings.Contains(body, "--webhook-allow-nets") {
			t.Errorf("PUT an alarm to %s: %d %s, want 400 bad_url naming --webhook-allow-nets", u, code, body)
		}
	}
	cfg = testConfig(t) // allows loopback
	s = startServer(t, cfg, &syncBuffer{})
	if code, body := do(t, s, "PUT", "/v1/alarms/inward", `{"url":"`+s.URL()+`/hook","when":{"buried_over":0}}`); code != http.StatusCreated {
		t.Errorf("PUT with loopback allowed: %d %s, want 201", code, body)
	}
}
