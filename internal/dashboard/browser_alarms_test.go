package dashboard_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq/api"
)

// TestBrowserAlarms drives the alarms view in headless Chromium: the list
// with each alarm's state and the topics it fires for, and a delete
// confirmed in the browser's dialog, checked over the API.
func TestBrowserAlarms(t *testing.T) {
	chromium := findChromium(t)
	a := newAPIs(t)
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)
	put(t, srv.URL+"/v1/alarms/dead-letters", `{"url":"`+hook.URL+`","topics":["shop/*"],"when":{"buried_over":0},"repeat":"10m"}`)
	put(t, srv.URL+"/v1/alarms/slow", `{"url":"`+hook.URL+`","when":{"oldest_ready_over":"5m"}}`)
	post(t, srv.URL+"/v1/topics/shop%2Forders/jobs", `{"id":"o1","body":"x"}`, nil)
	var r api.JobsResponse
	post(t, srv.URL+"/v1/reserve", `{"topics":["shop/orders"]}`, &r)
	post(t, srv.URL+"/v1/jobs/o1/bury", `{"reservation":"`+r.Jobs[0].Reservation+`"}`, nil)
	if err := a.alarms.Evaluate(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx)

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.ID("alarms-link")),
		chromedp.Click(chromedp.ID("alarms-link")),
		chromedp.WaitVisible(chromedp.CSS(`#alarms tr[data-alarm="slow"]`)))
	want := [][]string{
		{"dead-letters", "firing", "shop/*", "buried_over 0", "10m0s"},
		{"slow", "ok", "all", "oldest_ready_over 5m0s", "never"},
	}
	if diff := cmp.Diff(want, evalRows(t, ctx, "#alarms", 5)); diff != "" {
		t.Errorf("alarms table (-want +got):\n%s", diff)
	}
	if got := text(t, ctx, `#alarms tr[data-alarm="dead-letters"] td.firing`); !strings.Contains(got, "shop/orders buried_over: 1 > 0 since") || strings.Contains(got, "[object") {
		t.Errorf("dead-letters firing cell = %q, want shop/orders with its value and since", got)
	}
	if got := text(t, ctx, `#alarms tr[data-alarm="slow"] td.firing`); got != "none" {
		t.Errorf("slow firing cell = %q, want none", got)
	}
	shot(t, ctx, "delayq-dashboard-alarms.png")

	run(t, ctx, chromedp.Click(chromedp.CSS(`#alarms tr[data-alarm="slow"] button.delete`)),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if msg := <-confirms; !strings.Contains(msg, "slow") {
		t.Errorf("delete asked %q, want a question naming the alarm", msg)
	}
	run(t, ctx, chromedp.WaitNotPresent(chromedp.CSS(`#alarms tr[data-alarm="slow"]`)))
	if status, _ := getError(t, srv.URL+"/v1/alarms/slow"); status != http.StatusNotFound {
		t.Errorf("GET slow after delete in the dashboard = %d, want 404", status)
	}
}
