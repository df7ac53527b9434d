package alarm

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// request is one delivery as the receiver got it.
type request struct {
	header http.Header
	body   []byte
}

func newRawReceiver(t *testing.T) (*httptest.Server, chan request) {
	t.Helper()
	ch := make(chan request, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		ch <- request{r.Header.Clone(), b}
	}))
	t.Cleanup(srv.Close)
	return srv, ch
}

func nextRequest(t *testing.T, ch chan request) request {
	t.Helper()
	select {
	case r := <-ch:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10s")
	}
	return request{}
}

// verify checks a delivery's signature as docs/alarms.md tells a receiver
// to, written here from the documentation rather than with Sign: the
// HMAC-SHA256 of "<X-Delayq-Timestamp>.<body>" keyed by the secret, in
// X-Delayq-Signature as sha256=<hex>, with a timestamp within 5 minutes.
func verify(t *testing.T, r request, secret string) {
	t.Helper()
	ts := r.header.Get("X-Delayq-Timestamp")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		t.Fatalf("X-Delayq-Timestamp = %q: %v", ts, err)
	}
	if d := time.Since(time.Unix(sec, 0)); d < -time.Minute || d > 5*time.Minute {
		t.Errorf("timestamp %s is %s from now", ts, d)
	}
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts + "." + string(r.body)))
	want := "sha256=" + hex.EncodeToString(mac.Sum(nil))
	if got := r.header.Get("X-Delayq-Signature"); !hmac.Equal([]byte(got), []byte(want)) {
		t.Errorf("X-Delayq-Signature = %q, want %q", got, want)
	}
	// A receiver that checks refuses a body changed in flight, and the
	// same body under another timestamp (a replay made to look fresh).
	for _, forged := range []string{ts + "." + string(r.body) + " ", strconv.FormatInt(sec+1, 10) + "." + string(r.body)} {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(forged))
		if hmac.Equal([]byte(r.header.Get("X-Delayq-Signature")), []byte("sha256="+hex.EncodeToString(m.Sum(nil)))) {
			t.Errorf("the signature also matches %q", forged)
		}
	}
}

// TestWebhookFormatsSignedDelivered: an alarm with a secret, custom
// headers and each format delivers a firing and a resolved event over
// real HTTP, signed over timestamp and body, in that format's shape.
// Before, events were unsigned, carried no custom headers and spoke only
// delayq's JSON.
func TestWebhookFormatsSignedDelivered(t *testing.T) {
	for _, format := range []string{"delayq", "alertmanager", "slack"} {
		t.Run(format, func(t *testing.T) {
			srv, got := newRawReceiver(t)
			f := newFixture(t, Config{Retries: -1})
			f.set("pager", `{"url":"`+srv.URL+`","topics":["jobs"],"when":{"buried_over":0},"secret":"s3cret",`+
				`"headers":{"authorization":"Bearer rcv-token","X-Route":"team-a"},"format":"`+format+`"}`)
			f.bury("jobs", "j1")
			t0 := time.Now()
			f.eval(f.svc, t0)
			firing := nextRequest(t, got)
			j, err := f.e.KickJob(context.Background(), delayq.Ref{ID: "j1"})
			if err != nil || j.State != delayq.StateReady {
				t.Fatalf("KickJob = %v, %v", j, err)
			}
			f.eval(f.svc, t0.Add(time.Second))
			resolved := nextRequest(t, got)

			for _, r := range []request{firing, resolved} {
				verify(t, r, "s3cret")
				if r.header.Get("Authorization") != "Bearer rcv-token" || r.header.Get("X-Route") != "team-a" {
					t.Errorf("custom headers = %v", r.header)
				}
				if r.header.Get("Content-Type") != "application/json" {
					t.Errorf("Content-Type = %q", r.header.Get("Content-Type"))
				}
			}
			switch format {
			case "delayq":
				for i, r := range []request{firing, resolved} {
					var ev api.AlarmEvent
					if err := json.Unmarshal(r.body, &ev); err != nil {
						t.Fatal(err)
					}
					want := []string{StateFiring, StateResolved}[i]
					if ev.Alarm != "pager" || ev.Topic != "jobs" || ev.Condition != CondBuried || ev.State != want {
						t.Errorf("event %d = %+v", i, ev)
					}
				}
			case "alertmanager":
				for i, r := range []request{firing, resolved} {
					checkAlertmanager(t, r.body, []string{"firing", "resolved"}[i])
				}
			case "slack":
				for i, r := range []request{firing, resolved} {
					var m map[string]any
					if err := json.Unmarshal(r.body, &m); err != nil {
						t.Fatal(err)
					}
					text, _ := m["text"].(string)
					want := []string{"[FIRING] delayq alarm pager: topic jobs: buried_over is 1, over 0", "[RESOLVED] delayq alarm pager: topic jobs: buried_over resolved"}[i]
					if len(m) != 1 || !strings.HasPrefix(text, want) {
						t.Errorf("slack payload %d = %s, want {\"text\": %q...}", i, r.body, want)
					}
				}
			}
		})
	}
}

// checkAlertmanager checks an Alertmanager webhook payload (version 4):
// the fields a receiver written for Alertmanager reads.
func checkAlertmanager(t *testing.T, body []byte, status string) {
	t.Helper()
	var p struct {
		Version     string            `json:"version"`
		GroupKey    string            `json:"groupKey"`
		Status      string            `json:"status"`
		Receiver    string            `json:"receiver"`
		GroupLabels map[string]string `json:"groupLabels"`
		Alerts      []struct {
			Status      string            `json:"status"`
			Labels      map[string]string `json:"labels"`
			Annotations map[string]string `json:"annotations"`
			StartsAt    time.Time         `json:"startsAt"`
			EndsAt      time.Time         `json:"endsAt"`
			Fingerprint string            `json:"fingerprint"`
		} `json:"alerts"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	json.Unmarshal(body, &raw)
	for _, k := range []string{"version", "groupKey", "truncatedAlerts", "status", "receiver", "groupLabels", "commonLabels", "commonAnnotations", "externalURL", "alerts"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("alertmanager payload lacks %q: %s", k, body)
		}
	}
	if p.Version != "4" || p.Status != status || p.GroupLabels["alertname"] != "pager" || len(p.Alerts) != 1 {
		t.Fatalf("alertmanager payload = %s", body)
	}
	a := p.Alerts[0]
	if a.Status != status || a.Labels["alertname"] != "pager" || a.Labels["topic"] != "jobs" || a.Labels["condition"] != CondBuried ||
		a.Annotations["summary"] == "" || a.StartsAt.IsZero() || len(a.Fingerprint) != 16 {
		t.Errorf("alert = %+v", a)
	}
	if status == "firing" && !a.EndsAt.IsZero() || status == "resolved" && !a.EndsAt.After(a.StartsAt) {
		t.Errorf("%s alert endsAt = %s, startsAt %s", status, a.EndsAt, a.StartsAt)
	}
}

// TestWebhookNoSecretNoSignature: without a secret nothing claims to be
// signed.
func TestWebhookNoSecretNoSignature(t *testing.T) {
	srv, got := newRawReceiver(t)
	f := newFixture(t, Config{Retries: -1})
	f.set("plain", `{"url":"`+srv.URL+`","when":{"buried_over":0}}`)
	f.bury("jobs", "j1")
	f.eval(f.svc, time.Now())
	r := nextRequest(t, got)
	if r.header.Get("X-Delayq-Signature") != "" || r.header.Get("X-Delayq-Timestamp") != "" {
		t.Errorf("unsigned alarm sent %v", r.header)
	}
}

// TestWebhookSettingsRefused: bad formats, header names and values, and
// secrets are refused with their named codes.
func TestWebhookSettingsRefused(t *testing.T) {
	base := `"url":"http://127.0.0.1:1/","when":{"buried_over":0}`
	for _, c := range []struct{ body, code string }{
		{`{` + base + `,"format":"pagerduty"}`, delayq.CodeBadAlarmFormat},
		{`{` + base + `,"format":"Slack"}`, delayq.CodeBadAlarmFormat},
		{`{` + base + `,"headers":{"Bad Name":"x"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"":"x"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"X-Ok:":"x"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"host":"evil"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"Content-Length":"1"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"Transfer-Encoding":"chunked"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"Connection":"close"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"x-delayq-signature":"sha256=00"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"X-A":"a\r\nHost: evil"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"X-A":"a","x-a":"b"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{"X-A":"` + strings.Repeat("v", MaxHeaderValueLen+1) + `"}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"headers":{` + manyHeaders(MaxHeaders+1) + `}}`, delayq.CodeBadAlarmHeader},
		{`{` + base + `,"secret":"` + strings.Repeat("s", MaxSecretLen+1) + `"}`, delayq.CodeBadAlarmSecret},
	} {
		_, err := Parse("a", []byte(c.body))
		var ve *delayq.ValidationError
		if !errors.As(err, &ve) || ve.Code != c.code {
			t.Errorf("Parse(%.80s) = %v, want code %s", c.body, err, c.code)
		}
	}
	// The mask stands for a stored secret; with none stored it is refused.
	f := newFixture(t, Config{})
	a, err := Parse("new", []byte(`{`+base+`,"secret":"`+api.SecretMask+`"}`))
	if err != nil {
		t.Fatal(err)
	}
	var ve *delayq.ValidationError
	if _, _, err := f.svc.Put(context.Background(), a); !errors.As(err, &ve) || ve.Code != delayq.CodeBadAlarmSecret {
		t.Errorf("Put(mask, nothing stored) = %v, want %s", err, delayq.CodeBadAlarmSecret)
	}
}

func manyHeaders(n int) string {
	var parts []string
	for i := range n {
		parts = append(parts, `"X-H`+strconv.Itoa(i)+`":"v"`)
	}
	return strings.Join(parts, ",")
}

// TestSecretWriteOnly: the secret never comes back (Request shows the
// mask), and putting the definition read back keeps the stored secret.
func TestSecretWriteOnly(t *testing.T) {
	f := newFixture(t, Config{})
	a := f.set("s", `{"url":"http://127.0.0.1:1/","when":{"buried_over":0},"secret":"s3cret"}`)
	r := a.Request()
	if r.Secret != api.SecretMask {
		t.Fatalf("Request().Secret = %q, want the mask", r.Secret)
	}
	back, err := FromRequest("s", &r)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := f.svc.Put(context.Background(), back); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.Get(context.Background(), "s")
	if err != nil || got.Secret != "s3cret" {
		t.Errorf("after a put of the mask, secret = %q, %v; want the stored one kept", got.Secret, err)
	}
}
