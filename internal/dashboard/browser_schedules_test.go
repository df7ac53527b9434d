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
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq/api"
)

// TestBrowserSchedules drives the schedules view in headless Chromium:
// the list with each schedule's next fire times, pause and resume, and a
// delete confirmed in the browser's dialog; each checked over the API.
func TestBrowserSchedules(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	put(t, srv.URL+"/v1/schedules/nightly", `{"topic":"reports","cron":"0 30 2 * * *","timezone":"Europe/Berlin"}`)
	put(t, srv.URL+"/v1/schedules/beat", `{"topic":"shop/orders(eu)$1","every":"1h"}`)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx)

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("schedules-link")),
		chromedp.Click(chromedp.ID("schedules-link")),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="nightly"]`)))
	want := [][]string{
		{"beat", "shop/orders(eu)$1", "@every 1h0m0s", "UTC"},
		{"nightly", "reports", "0 30 2 * * *", "Europe/Berlin"},
	}
	if diff := cmp.Diff(want, evalRows(t, ctx, "#schedules", 4)); diff != "" {
		t.Errorf("schedules table (-want +got):\n%s", diff)
	}
	n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#schedules tr[data-schedule="nightly"] td.next li').length`))
	if err != nil || n != 5 {
		t.Errorf("nightly shows %d next fire times (%v), want 5", n, err)
	}
	shot(t, ctx, "delayq-dashboard-schedules.png")

	// Pause, then resume: the view and the API agree.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule="beat"] button.pause`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="beat"] button.resume`)))
	if got := text(t, ctx, "#notice"); got != "Paused schedule beat." {
		t.Errorf("notice after pause = %q", got)
	}
	if s := getSchedule(t, srv.URL+"/v1/schedules/beat"); !s.Paused {
		t.Errorf("GET beat after pause in the dashboard: paused = false")
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule="beat"] button.resume`)),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="beat"] button.pause`)))
	if s := getSchedule(t, srv.URL+"/v1/schedules/beat"); s.Paused {
		t.Errorf("GET beat after resume in the dashboard: paused = true")
	}

	// Delete, confirmed in the dialog.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule="nightly"] button.delete`)),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if msg := <-confirms; !strings.Contains(msg, "nightly") {
		t.Errorf("delete asked %q, want a question naming the schedule", msg)
	}
	run(t, ctx, chromedp.WaitNotPresent(chromedp.CSS(`#schedules tr[data-schedule="nightly"]`)))
	if status, _ := getError(t, srv.URL+"/v1/schedules/nightly"); status != http.StatusNotFound {
		t.Errorf("GET nightly after delete in the dashboard = %d, want 404", status)
	}
}

func put(t *testing.T, url, body string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("PUT %s %s = %d %s", url, body, resp.StatusCode, b)
	}
}

func getSchedule(t *testing.T, url string) api.Schedule {
	t.Helper()
	var s api.Schedule
	status, body := getBody(t, url)
	if status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, status, body)
	}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	return s
}

func getBody(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestBrowserPauseTopic pauses a topic for a while from its page, checks
// the API sees it paused, then resumes it.
func TestBrowserPauseTopic(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	post(t, srv.URL+"/v1/topics/mail/jobs", `{"id":"m1","body":"hi"}`, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx) // also starts the browser on ctx, not on a step's shorter context

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/mail"), chromedp.WaitVisible(chromedp.ID("pause-for")))
	run(t, ctx, chromedp.SetValue(chromedp.ID("pause-for"), "30m"))
	run(t, ctx, chromedp.Click(chromedp.CSS("#pause-topic button")), chromedp.WaitVisible(chromedp.ID("resume-topic")))
	if got := text(t, ctx, "#notice"); got != "Paused topic mail for 30m." {
		t.Errorf("notice after pause = %q", got)
	}
	var tp api.Topic
	if status, body := getBody(t, srv.URL+"/v1/topics/mail"); status != 200 || json.Unmarshal([]byte(body), &tp) != nil || !tp.Paused {
		t.Fatalf("GET topic after pause in the dashboard = %d %s", status, body)
	}
	var r api.JobsResponse
	post(t, srv.URL+"/v1/reserve", `{"topics":["mail"]}`, &r)
	if len(r.Jobs) != 0 {
		t.Fatalf("reserved %v from a topic paused in the dashboard", r.Jobs)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("resume-topic")), chromedp.WaitVisible(chromedp.ID("pause-for")))
	post(t, srv.URL+"/v1/reserve", `{"topics":["mail"]}`, &r)
	if len(r.Jobs) != 1 {
		t.Fatalf("after resume in the dashboard reserved %d jobs, want 1", len(r.Jobs))
	}

	// Purge the delayed jobs from the delayed tab, after the confirmation.
	for _, id := range []string{"d1", "d2"} {
		post(t, srv.URL+"/v1/topics/mail/jobs", `{"id":"`+id+`","body":"x","delay":"1h"}`, nil)
	}
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/mail?state=delayed"), chromedp.WaitVisible(chromedp.ID("purge")),
		chromedp.Click(chromedp.ID("purge")), chromedp.WaitVisible(chromedp.ID("notice")))
	if msg := <-confirms; !strings.Contains(msg, "2 delayed") {
		t.Errorf("purge asked %q, want a question naming 2 delayed jobs", msg)
	}
	if got := text(t, ctx, "#notice"); got != "Deleted 2 delayed job(s) of mail." {
		t.Errorf("notice after purge = %q", got)
	}
	if status, body := getBody(t, srv.URL+"/v1/topics/mail"); status != 200 || json.Unmarshal([]byte(body), &tp) != nil || tp.Delayed != 0 || tp.Reserved != 1 {
		t.Fatalf("GET topic after purge in the dashboard = %d %s; want no delayed jobs, the reserved one kept", status, body)
	}
}
