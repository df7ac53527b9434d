package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/delayq/delayq/api"
)

// TestBrowserPolicy sets a topic's policy from its page, sees a refused
// one named and nothing changed, and clears it after the confirmation;
// each checked over the API.
func TestBrowserPolicy(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	post(t, srv.URL+"/v1/topics/mail/jobs", `{"id":"m1","body":"hi"}`, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx)

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/mail"), chromedp.WaitVisible(chromedp.ID("policy-form")))
	if got := text(t, ctx, "#policy-summary"); !strings.HasPrefix(got, "No policy") {
		t.Errorf("summary without a policy = %q", got)
	}
	run(t, ctx,
		chromedp.SetValue(chromedp.ID("policy-ttr"), "30s"),
		chromedp.SetValue(chromedp.ID("policy-max-jobs"), "2"),
		chromedp.SetValue(chromedp.ID("policy-backoff-initial"), "1s"),
		chromedp.SetValue(chromedp.ID("policy-backoff-factor"), "3"),
		chromedp.SetValue(chromedp.ID("policy-backoff-jitter"), "0.5"),
		chromedp.Click(chromedp.ID("policy-save")), chromedp.WaitVisible(chromedp.ID("policy-clear")))
	if got := text(t, ctx, "#notice"); got != "Saved the policy of topic mail." {
		t.Errorf("notice after save = %q", got)
	}
	want := api.Policy{Topic: "mail", TTR: ptr(api.Duration(30 * time.Second)), MaxJobs: 2,
		Backoff: &api.Backoff{Initial: api.Duration(time.Second), Max: api.Duration(time.Hour), Factor: 3, Jitter: 0.5}}
	if got := getPolicy(t, srv.URL); !equalJSON(got, want) {
		t.Errorf("GET policy after save in the dashboard = %+v, want %+v", got, want)
	}
	if got := text(t, ctx, "#policy-summary"); got != "ttr 30s · backoff 1s ×3 up to 1h0m0s ±50% · max jobs 2" {
		t.Errorf("summary = %q", got)
	}
	shot(t, ctx, "delayq-dashboard-policy.png")

	// A refused policy: the server's words show, and nothing changed.
	run(t, ctx, chromedp.SetValue(chromedp.ID("policy-backoff-jitter"), "2"),
		chromedp.Click(chromedp.ID("policy-save")), chromedp.WaitVisible(chromedp.ID("error")))
	if got := text(t, ctx, "#error"); !strings.Contains(got, "backoff.jitter") {
		t.Errorf("error after a bad jitter = %q, want the server's message naming backoff.jitter", got)
	}
	if got := getPolicy(t, srv.URL); !equalJSON(got, want) {
		t.Errorf("a refused save changed the policy to %+v", got)
	}

	// The bound works: the policy's max_jobs refuses a third job.
	post(t, srv.URL+"/v1/topics/mail/jobs", `{"id":"m2","body":"hi"}`, nil)
	if status, body := postStatus(t, srv.URL+"/v1/topics/mail/jobs", `{"id":"m3","body":"hi"}`); status != http.StatusTooManyRequests || !strings.Contains(body, "topic_full") {
		t.Errorf("a put past the dashboard's max jobs = %d %s, want 429 topic_full", status, body)
	}

	// Clear, confirmed in the dialog.
	run(t, ctx, chromedp.Click(chromedp.ID("policy-clear")), chromedp.WaitNotPresent(chromedp.ID("policy-clear")))
	if msg := <-confirms; !strings.Contains(msg, "mail") {
		t.Errorf("clear asked %q, want a question naming the topic", msg)
	}
	if got := text(t, ctx, "#notice"); got != "Cleared the policy of topic mail." {
		t.Errorf("notice after clear = %q", got)
	}
	if status, _ := getError(t, srv.URL+"/v1/topics/mail/policy"); status != http.StatusNotFound {
		t.Errorf("GET policy after clear in the dashboard = %d, want 404", status)
	}
}

func ptr[T any](v T) *T { return &v }

func getPolicy(t *testing.T, base string) api.Policy {
	t.Helper()
	status, body := getBody(t, base+"/v1/topics/mail/policy")
	var p api.Policy
	if status != http.StatusOK || json.Unmarshal([]byte(body), &p) != nil {
		t.Fatalf("GET policy = %d %s", status, body)
	}
	return p
}

func equalJSON(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

func postStatus(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
