package server

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// TestAlarmWebhookOverHTTP: bad webhook settings are refused 400 with
// their named codes and store nothing; an alarm's secret is never sent
// back, survives the definition being read and put again, and signs a
// real delivery that a receiver verifies as docs/alarms.md says, in the
// Alertmanager format with the custom headers.
func TestAlarmWebhookOverHTTP(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	type delivery struct {
		header http.Header
		body   []byte
	}
	got := make(chan delivery, 10)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- delivery{r.Header.Clone(), b}
	}))
	defer rcv.Close()
	cfg := testConfig(t)
	cfg.AlarmInterval = 100 * time.Millisecond
	s := startServer(t, cfg, &syncBuffer{})

	base := `"url":"` + rcv.URL + `","topics":["orders"],"when":{"buried_over":0}`
	for _, c := range []struct{ body, code string }{
		{`{` + base + `,"format":"pagerduty"}`, "bad_alarm_format"},
		{`{` + base + `,"headers":{"Bad Header":"x"}}`, "bad_alarm_header"},
		{`{` + base + `,"headers":{"Host":"other.example"}}`, "bad_alarm_header"},
		{`{` + base + `,"headers":{"Content-Length":"0"}}`, "bad_alarm_header"},
		{`{` + base + `,"secret":"` + api.SecretMask + `"}`, "bad_alarm_secret"},
	} {
		code, body := do(t, s, "PUT", "/v1/alarms/pager", c.body)
		var e api.ErrorResponse
		json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || e.Error.Code != c.code {
			t.Errorf("PUT %s = %d %s, want 400 %s", c.body, code, body, c.code)
		}
	}
	if code, body := do(t, s, "GET", "/v1/alarms/pager", ""); code != http.StatusNotFound {
		t.Fatalf("after refused PUTs, GET = %d %s, want 404", code, body)
	}

	code, body := do(t, s, "PUT", "/v1/alarms/pager", `{`+base+`,"secret":"s3cret","headers":{"Authorization":"Bearer rcv"},"format":"alertmanager"}`)
	if code != http.StatusCreated || strings.Contains(body, "s3cret") {
		t.Fatalf("PUT = %d %s, want 201 without the secret", code, body)
	}
	code, body = do(t, s, "GET", "/v1/alarms/pager", "")
	var a api.Alarm
	if err := json.Unmarshal([]byte(body), &a); err != nil || code != 200 || strings.Contains(body, "s3cret") ||
		a.Secret != api.SecretMask || a.Format != "alertmanager" || a.Headers["Authorization"] != "Bearer rcv" {
		t.Fatalf("GET = %d %s, want the secret masked, the format and the headers", code, body)
	}
	// Read back and put again, as `delayq alarms get` then `put` would.
	again, _ := json.Marshal(api.AlarmRequest{URL: a.URL, Topics: a.Topics, When: a.When, Secret: a.Secret, Headers: a.Headers, Format: a.Format})
	if code, body := do(t, s, "PUT", "/v1/alarms/pager", string(again)); code != http.StatusOK {
		t.Fatalf("PUT of the definition read back = %d %s", code, body)
	}

	buryOne(t, newClient(t, s), "orders", "o1")
	var d delivery
	select {
	case d = <-got:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	ts := d.header.Get("X-Delayq-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Minute {
		t.Errorf("X-Delayq-Timestamp = %q, want about now", ts)
	}
	mac := hmac.New(sha256.New, []byte("s3cret")) // the secret put first: the mask kept it
	mac.Write([]byte(ts + "." + string(d.body)))
	if want := "sha256=" + hex.EncodeToString(mac.Sum(nil)); d.header.Get("X-Delayq-Signature") != want {
		t.Errorf("X-Delayq-Signature = %q, want %q", d.header.Get("X-Delayq-Signature"), want)
	}
	if d.header.Get("Authorization") != "Bearer rcv" {
		t.Errorf("Authorization = %q", d.header.Get("Authorization"))
	}
	var am struct {
		Version string `json:"version"`
		Status  string `json:"status"`
		Alerts  []struct {
			Labels map[string]string `json:"labels"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(d.body, &am); err != nil || am.Version != "4" || am.Status != "firing" || len(am.Alerts) != 1 ||
		am.Alerts[0].Labels["alertname"] != "pager" || am.Alerts[0].Labels["topic"] != "orders" {
		t.Errorf("payload = %s, want an Alertmanager firing of pager on orders", d.body)
	}
}
