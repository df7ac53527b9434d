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

// TestBrowserCharts drives the topic page's charts in headless Chromium
// against a real server whose history samples every sampleInterval: jobs
// by state, fires, lateness percentiles and the due-time distribution,
// then a live update after another put.
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
	post(t, base+"/jobs", `{"id":"r1","body":"x"}`, nil)
	var first, second api.JobsResponse
	post(t, srv.URL+"/v1/reserve", `{"topics":["`+chartsTopic+`"]}`, &first)
	post(t, srv.URL+"/v1/jobs/"+first.Jobs[0].ID+"/bury", `{"reservation":"`+first.Jobs[0].Reservation+`"}`, nil)
	post(t, srv.URL+"/v1/reserve", `{"topics":["`+chartsTopic+`"]}`, &second)
	for i, delay := range []string{"30s", "10m", "20m", "5h", "6h", "7h", "3d"} {
		post(t, base+"/jobs", `{"id":"d`+string(rune('0'+i))+`","body":"x","delay":"`+delay+`"}`, nil)
	}
	waitHistory(t, base, "a sample of the final counts", func(h api.TopicHistory) bool {
		s := h.Samples[len(h.Samples)-1]
		return s.Ready == 1 && s.Delayed == 7 && s.Reserved == 1 && s.Buried == 1
	})

	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx) // starts the browser on ctx, not on a step's shorter context
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/"+url.PathEscape(chartsTopic)),
		chromedp.WaitVisible(chromedp.CSS("#chart-due rect.due")))

	// Jobs by state: one stacked band per state, the legend with the
	// latest counts.
	if got := attrs(t, ctx, "#chart-states polygon.area", "data-state"); !cmp.Equal(got, []string{"ready", "delayed", "reserved", "buried"}) {
		t.Errorf("state bands = %v, want ready, delayed, reserved, buried", got)
	}
	if got := legendValues(t, ctx, "#charts figure:nth-child(1)"); !cmp.Equal(got, map[string]string{"ready": "1", "delayed": "7", "reserved": "1", "buried": "1"}) {
		t.Errorf("jobs by state legend = %v", got)
	}

	// Fires: bars for the samples that saw them, two in all.
	total := 0
	for _, n := range attrs(t, ctx, "#chart-fires rect.fire", "data-fires") {
		total += atoi(t, n)
	}
	if total != 2 {
		t.Errorf("fire bars add up to %d fires, want 2", total)
	}
	if got := legendValues(t, ctx, "#charts figure:nth-child(2)")["fire-total"]; got != "2" {
		t.Errorf("fired this hour = %q, want 2", got)
	}

	// Lateness: a line and dots per percentile; the legend in time units.
	if got := attrs(t, ctx, "#chart-lateness path.line", "data-percentile"); !cmp.Equal(got, []string{"p50", "p90", "p99"}) {
		t.Errorf("lateness lines = %v, want p50, p90, p99", got)
	}
	for _, p := range []string{"p50", "p90", "p99"} {
		if n := count(t, ctx, "#chart-lateness circle.dot."+p); n < 1 {
			t.Errorf("lateness %s has %d points, want at least the sample with the fires", p, n)
		}
		if v := legendValues(t, ctx, "#charts figure:nth-child(3)")[p]; !strings.HasSuffix(v, " ms") && !strings.HasSuffix(v, " µs") && !strings.HasSuffix(v, " s") {
			t.Errorf("lateness legend %s = %q, want a time in µs, ms or s", p, v)
		}
	}

	// Due-time distribution: within the next minute, hour and day.
	if got := attrs(t, ctx, "#chart-due rect.due", "data-within"); !cmp.Equal(got, []string{"1m", "1h", "24h"}) {
		t.Errorf("due bars = %v, want 1m, 1h, 24h", got)
	}
	if got := attrs(t, ctx, "#chart-due rect.due", "data-count"); !cmp.Equal(got, []string{"1", "3", "6"}) {
		t.Errorf("due counts = %v, want 1, 3, 6", got)
	}
	if got := texts(t, ctx, "#chart-due text.bar-label"); !cmp.Equal(got, []string{"next minute", "next hour", "next day"}) {
		t.Errorf("due labels = %v", got)
	}
	if got := texts(t, ctx, "#chart-due text.bar-value"); !cmp.Equal(got, []string{"1", "3", "6"}) {
		t.Errorf("due bar values = %v, want 1, 3, 6", got)
	}
	shot(t, ctx, "delayq-dashboard-charts.png")

	// Live: a put shows up without a reload, in the due bars and, after
	// the next sample, in the state legend.
	post(t, base+"/jobs", `{"id":"late","body":"x","delay":"40s"}`, nil)
	live, cancelLive := context.WithTimeout(ctx, 15*time.Second)
	defer cancelLive()
	if err := chromedp.Do(live,
		chromedp.WaitVisible(chromedp.CSS(`#chart-due rect.due[data-within="1m"][data-count="2"]`)),
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

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		t.Fatalf("%q is not a number", s)
	}
	return n
}
