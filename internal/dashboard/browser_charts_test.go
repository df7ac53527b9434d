package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq/api"
)

// sampleInterval is the history's interval in these tests: short, so a
// test waits for the next sample on the history endpoint instead of
// triggering one.
const sampleInterval = 200 * time.Millisecond

// chartsTopic needs percent-encoding in a URL.
const chartsTopic = "charts/eu(1)"

// TestBrowserCharts drives the topic page's uPlot charts in headless
// Chromium against a real server whose history samples every
// sampleInterval into the store: jobs by state, fires, finishes,
// failures, lateness percentiles and the due-time distribution, the
// ranges offered (up to the week the store keeps), a week's range in
// one-minute buckets, then a live update after another put.
// (TestBrowserLogin covers tooltips.)
func TestBrowserCharts(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1/topics/" + url.PathEscape(chartsTopic)

	// Two jobs the timer fires, then one put ready: f1 is buried, f2
	// reserved, r1 ready; seven delayed jobs spread over the next days.
	post(t, base+"/jobs", `{"id":"f1","body":"x","delay":"50ms"}`, nil)
	post(t, base+"/jobs", `{"id":"f2","body":"x","delay":"50ms"}`, nil)
	waitHistory(t, base, "both fires sampled", func(h api.TopicHistory) bool { return fires(h) == 2 })
	var first, second, third api.JobsResponse
	post(t, srv.URL+"/v1/reserve", `{"topics":["`+chartsTopic+`"]}`, &first)
	post(t, srv.URL+"/v1/jobs/"+first.Jobs[0].ID+"/bury", `{"reservation":"`+first.Jobs[0].Reservation+`"}`, nil) // a failed attempt
	post(t, srv.URL+"/v1/reserve", `{"topics":["`+chartsTopic+`"]}`, &second)
	post(t, base+"/jobs", `{"id":"done","body":"x"}`, nil)
	post(t, srv.URL+"/v1/reserve", `{"topics":["`+chartsTopic+`"]}`, &third)
	post(t, srv.URL+"/v1/jobs/"+third.Jobs[0].ID+"/finish", `{"reservation":"`+third.Jobs[0].Reservation+`"}`, nil) // a finish
	post(t, base+"/jobs", `{"id":"r1","body":"x"}`, nil)
	for i, delay := range []string{"30s", "10m", "20m", "5h", "6h", "7h", "3d"} {
		post(t, base+"/jobs", `{"id":"d`+string(rune('0'+i))+`","body":"x","delay":"`+delay+`"}`, nil)
	}
	waitHistory(t, base, "a sample of the final counts", func(h api.TopicHistory) bool {
		s := h.Samples[len(h.Samples)-1]
		return s.Ready == 1 && s.Delayed == 7 && s.Reserved == 1 && s.Buried == 1 && finishes(h) == 1
	})

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx) // starts the browser on ctx, not on a step's shorter context
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/"+url.PathEscape(chartsTopic)),
		chromedp.WaitVisible(chromedp.CSS("#chart-due li[data-within]")))

	// Every chart is drawn by uPlot, on a canvas.
	for _, id := range []string{"chart-states", "chart-fires", "chart-finishes", "chart-failures", "chart-lateness", "chart-due"} {
		if n := count(t, ctx, "#"+id+" .uplot canvas"); n != 1 {
			t.Errorf("#%s has %d uPlot canvases, want 1", id, n)
		}
	}

	// Jobs by state: the legend with the latest counts.
	if got := legendValues(t, ctx, "#chart-states"); !cmp.Equal(got, map[string]string{"ready": "1", "delayed": "7", "reserved": "1", "buried": "1"}) {
		t.Errorf("jobs by state legend = %v", got)
	}

	// Fires: two in all over the range shown.
	if got := legendValues(t, ctx, "#chart-fires")["fire-total"]; got != "2" {
		t.Errorf("fired in the range = %q, want 2", got)
	}

	// Finishes and failures: one of each over the range shown.
	if got := legendValues(t, ctx, "#chart-finishes")["finish-total"]; got != "1" {
		t.Errorf("finished in the range = %q, want 1", got)
	}
	if got := legendValues(t, ctx, "#chart-failures")["failure-total"]; got != "1" {
		t.Errorf("failed attempts in the range = %q, want 1 (the bury)", got)
	}

	// Lateness: the legend in time units.
	for _, p := range []string{"p50", "p90", "p99"} {
		if v := legendValues(t, ctx, "#chart-lateness")[p]; !strings.HasSuffix(v, " ms") && !strings.HasSuffix(v, " µs") && !strings.HasSuffix(v, " s") {
			t.Errorf("lateness legend %s = %q, want a time in µs, ms or s", p, v)
		}
	}

	// Due-time distribution: within the next minute, hour and day.
	if got := attrs(t, ctx, "#chart-due li[data-within]", "data-within"); !cmp.Equal(got, []string{"1m", "1h", "24h"}) {
		t.Errorf("due buckets = %v, want 1m, 1h, 24h", got)
	}
	if got := attrs(t, ctx, "#chart-due li[data-within]", "data-count"); !cmp.Equal(got, []string{"1", "3", "6"}) {
		t.Errorf("due counts = %v, want 1, 3, 6", got)
	}
	if got := texts(t, ctx, "#chart-due li[data-within]"); !cmp.Equal(got, []string{"next minute 1", "next hour 3", "next day 6"}) {
		t.Errorf("due labels = %v", got)
	}

	// The store keeps a week: every range is offered, and the page says
	// what is kept.
	if got := eval[[]bool](t, ctx, `[...document.querySelectorAll('#chart-range button')].map(b => b.disabled)`); !cmp.Equal(got, []bool{false, false, false, false, false}) {
		t.Errorf("range buttons disabled = %v, want all five (15 min to 7 days) offered", got)
	}
	if got := text(t, ctx, "#charts-status"); !strings.Contains(got, "The last 1 hour in 10 s buckets") ||
		!strings.Contains(got, "10 s buckets for 24 hours and 1 min buckets for 7 days") {
		t.Errorf("charts status = %q", got)
	}
	shot(t, ctx, "delayq-dashboard-charts.png")

	// A week: the page asks for it and draws one-minute buckets, with the
	// same totals.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#chart-range button[data-range="604800"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#charts[data-span="604800"] #chart-range button.current[data-range="604800"]`)))
	if got := text(t, ctx, "#charts-status"); !strings.Contains(got, "The last 7 days in 1 min buckets") {
		t.Errorf("charts status of a week = %q", got)
	}
	for fig, want := range map[string]string{"#chart-fires": "fire-total", "#chart-finishes": "finish-total", "#chart-failures": "failure-total"} {
		if got := text(t, ctx, fig+` li[data-series="`+want+`"]`); !strings.Contains(got, "in the last 7 days") {
			t.Errorf("%s legend of a week = %q", fig, got)
		}
	}
	if got := legendValues(t, ctx, "#chart-fires")["fire-total"]; got != "2" {
		t.Errorf("fired in a week = %q, want 2", got)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#chart-range button[data-range="3600"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#charts[data-span="3600"]`)))

	// Live: a put shows up without a reload, in the due counts and, after
	// the next sample, in the state legend.
	post(t, base+"/jobs", `{"id":"late","body":"x","delay":"40s"}`, nil)
	live, cancelLive := context.WithTimeout(ctx, 15*time.Second)
	defer cancelLive()
	if err := chromedp.Do(live,
		chromedp.WaitVisible(chromedp.CSS(`#chart-due li[data-within="1m"][data-count="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#charts li[data-series="delayed"][data-value="8"]`))); err != nil {
		t.Fatalf("the charts did not update after a put: %v", err)
	}
}

// waitHistory polls the topic's history until ok holds for a sampled
// history: the sampler runs on its own, so the test waits on what the
// endpoint shows.
func waitHistory(t *testing.T, base, what string, ok func(api.TopicHistory) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var h api.TopicHistory
	for ctx.Err() == nil {
		resp, err := http.Get(base + "/history")
		if err != nil {
			t.Fatal(err)
		}
		h = api.TopicHistory{}
		err = json.NewDecoder(resp.Body).Decode(&h)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET history: %v", err)
		}
		if h.Sampled && len(h.Samples) > 0 && ok(h) {
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(sampleInterval / 4): // the next sample is at most one interval away
		}
	}
	t.Fatalf("history never showed %s; last: %+v", what, h)
}

func finishes(h api.TopicHistory) int {
	n := 0
	for _, s := range h.Samples {
		n += s.Finishes
	}
	return n
}

func fires(h api.TopicHistory) int {
	n := 0
	for _, s := range h.Samples {
		n += s.Fires
	}
	return n
}

// attrs returns attribute name of every element matching css, in order.
func attrs(t *testing.T, ctx context.Context, css, name string) []string {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll(`+jsString(css)+`)].map(e => e.getAttribute(`+jsString(name)+`))`))
	if err != nil {
		t.Fatalf("reading %s: %v", css, err)
	}
	return got
}

func texts(t *testing.T, ctx context.Context, css string) []string {
	t.Helper()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](
		`[...document.querySelectorAll(`+jsString(css)+`)].map(e => e.textContent)`))
	if err != nil {
		t.Fatalf("reading %s: %v", css, err)
	}
	return got
}

func count(t *testing.T, ctx context.Context, css string) int {
	t.Helper()
	return len(texts(t, ctx, css))
}

// legendValues maps each legend entry of the figure to its value.
func legendValues(t *testing.T, ctx context.Context, figure string) map[string]string {
	t.Helper()
	keys := attrs(t, ctx, figure+" li[data-series]", "data-series")
	values := texts(t, ctx, figure+" li[data-series] b")
	out := make(map[string]string, len(keys))
	for i, k := range keys {
		if i < len(values) {
			out[k] = values[i]
		}
	}
	return out
}
