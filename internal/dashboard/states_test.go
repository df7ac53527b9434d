package dashboard_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/cli"
)

// TestOneJobFourViews drives one job through every outcome an attempt
// can have that is not a finish (released, ttr_expired, buried by its
// last attempt, a retry, buried by its consumer) and then deletes it,
// and checks that the API's JSON, `delayq get`, the dashboard in Chromium
// and /metrics tell the same story, in docs/states.md's terms: buried is
// failed, each attempt counts once by its outcome, and
// delayq_jobs_failed_total counts the times the job failed.
func TestOneJobFourViews(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	const topic = "pay"
	jobURL := srv.URL + "/v1/jobs/j1"
	reserve := func() string {
		t.Helper()
		var r api.JobsResponse
		post(t, srv.URL+"/v1/reserve", `{"topics":["`+topic+`"]}`, &r)
		if len(r.Jobs) != 1 || r.Jobs[0].ID != "j1" {
			t.Fatalf("reserve = %+v, want j1", r.Jobs)
		}
		return r.Jobs[0].Reservation
	}
	post(t, srv.URL+"/v1/topics/"+topic+"/jobs", `{"id":"j1","body":"x","ttr":"1s","max_attempts":3}`, nil)
	// 1: released (retried).
	post(t, jobURL+"/release", `{"reservation":"`+reserve()+`","reason":"busy"}`, nil)
	// 2: its TTR runs out (retried).
	reserve()
	deadline := time.Now().Add(10 * time.Second)
	for getJob(t, jobURL).State != "ready" {
		if time.Now().After(deadline) {
			t.Fatal("the TTR expiry did not make j1 ready in 10 s")
		}
		time.Sleep(20 * time.Millisecond) // polls the observable state
	}
	// 3: the last allowed attempt is released: the job failed (buried).
	post(t, jobURL+"/release", `{"reservation":"`+reserve()+`","reason":"still busy"}`, nil)

	// Buried is failed, in every view.
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx)
	v := views(t, ctx, srv.URL, "j1")
	wantBuried := view{State: "buried", Timeouts: 1, Releases: 1, Buries: 1, Kicks: 0,
		Outcomes: []string{"released", "ttr_expired", "buried"}}
	for name, got := range v {
		if diff := cmp.Diff(wantBuried, got); diff != "" {
			t.Errorf("%s after the last attempt's release (-want +got):\n%s", name, diff)
		}
	}
	m := scrape(t, srv.URL)
	if got := m[`delayq_jobs{state="buried",topic="pay"}`]; got != 1 {
		t.Errorf(`/metrics delayq_jobs{state="buried"} = %v, want 1`, got)
	}
	if got := m[`delayq_jobs_failed_total{reason_class="attempts_exhausted",topic="pay"}`]; got != 1 {
		t.Errorf("/metrics jobs failed (attempts exhausted) = %v, want 1: the job failed once", got)
	}
	for _, class := range []string{"released", "ttr_expired"} {
		if got, ok := m[`delayq_jobs_failed_total{reason_class="`+class+`",topic="pay"}`]; ok {
			t.Errorf("/metrics counts a retried attempt as a failed job: reason_class=%s = %v", class, got)
		}
	}

	// Retry it (kick), then its consumer buries it, then an operator
	// deletes it: it ends failed.
	post(t, jobURL+"/kick", `{}`, nil)
	post(t, jobURL+"/bury", `{"reservation":"`+reserve()+`","reason":"gave up"}`, nil)
	req, _ := http.NewRequest(http.MethodDelete, jobURL, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("DELETE j1 = %d", resp.StatusCode)
	}
	v = views(t, ctx, srv.URL, "j1")
	wantFailed := view{State: "failed", Timeouts: 1, Releases: 1, Buries: 2, Kicks: 1,
		Outcomes: []string{"released", "ttr_expired", "buried", "buried"}}
	for name, got := range v {
		if diff := cmp.Diff(wantFailed, got); diff != "" {
			t.Errorf("%s after retry, bury and delete (-want +got):\n%s", name, diff)
		}
	}
	m = scrape(t, srv.URL)
	failedJobs := m[`delayq_jobs_failed_total{reason_class="attempts_exhausted",topic="pay"}`] + m[`delayq_jobs_failed_total{reason_class="buried",topic="pay"}`]
	if failedJobs != float64(wantFailed.Buries) {
		t.Errorf("/metrics delayq_jobs_failed_total for pay = %v, want %d: once each time the job was buried", failedJobs, wantFailed.Buries)
	}
	// Failed attempts: every attempt that ended without a finish, once.
	failedAttempts := m[`delayq_releases_total{topic="pay"}`] + m[`delayq_ttr_expired_total{topic="pay"}`] + m[`delayq_buries_total{topic="pay"}`]
	if want := float64(len(wantFailed.Outcomes)); failedAttempts != want {
		t.Errorf("/metrics failed attempts (releases + TTR expiries + buries) = %v, want %v, one per attempt", failedAttempts, want)
	}
	// The dashboard lists it under the ended tab "failed".
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/pay?state=failed"),
		chromedp.WaitVisible(chromedp.CSS(`#states a.current[data-state="failed"]`)))
	if got := jobIDs(t, ctx); !cmp.Equal(got, []string{"j1"}) {
		t.Errorf("the Failed tab lists %v, want j1", got)
	}
}

// view is what one view says about a job.
type view struct {
	State                             string
	Timeouts, Releases, Buries, Kicks int
	Outcomes                          []string
}

// views reads job id from the API, the CLI and the dashboard.
func views(t *testing.T, ctx context.Context, base, id string) map[string]view {
	t.Helper()
	out := map[string]view{}
	j := getJob(t, base+"/v1/jobs/"+id)
	a := view{State: j.State, Timeouts: j.Timeouts, Releases: j.Releases, Buries: j.Buries, Kicks: j.Kicks}
	for _, h := range j.History {
		a.Outcomes = append(a.Outcomes, h.Outcome)
	}
	out["API"] = a

	var stdout, stderr bytes.Buffer
	if code := cli.Main(t.Context(), []string{"get", "--server=" + base, id}, &stdout, &stderr); code != 0 {
		t.Fatalf("delayq get: exit %d: %s", code, stderr.String())
	}
	c := view{}
	for _, line := range strings.Split(stdout.String(), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) == 2 && f[0] == "state":
			c.State = f[1]
		case len(f) > 1 && f[0] == "counts":
			c.Timeouts, c.Releases, c.Buries, c.Kicks = counts(t, line)
		case len(f) >= 6 && regexp.MustCompile(`^\d+$`).MatchString(f[0]):
			// "  N  RESERVED (ago)  BY  ENDED  OUTCOME  REASON": the
			// outcome is the field before the quoted reason.
			q := strings.Index(line, `"`)
			if q < 0 {
				q = len(line)
			}
			g := strings.Fields(line[:q])
			c.Outcomes = append(c.Outcomes, g[len(g)-1])
		}
	}
	out["delayq get"] = c

	// From a blank page: the same URL again would not load anew.
	run(t, ctx, chromedp.Navigate("about:blank"), chromedp.Navigate(base+"/ui/#/job/"+id))
	pollPage(t, ctx, `document.querySelector('#job dd[data-field="id"]')?.textContent === `+jsString(id)+
		` && document.querySelector('#job dd[data-field="counts"]')?.textContent.includes(`+jsString(fmt.Sprintf("%d kicks", a.Kicks))+`)`)
	d := view{State: text(t, ctx, `#job dd[data-field="state"]`)}
	d.Timeouts, d.Releases, d.Buries, d.Kicks = counts(t, text(t, ctx, `#job dd[data-field="counts"]`))
	for _, row := range evalRows(t, ctx, "#attempts", 5) {
		d.Outcomes = append(d.Outcomes, row[4])
	}
	out["dashboard"] = d
	return out
}

// counts reads "N timeouts (or TTR expiries), N releases, N buries, N kicks".
func counts(t *testing.T, s string) (timeouts, releases, buries, kicks int) {
	t.Helper()
	m := regexp.MustCompile(`(\d+) (?:timeouts|TTR expiries), (\d+) releases, (\d+) buries, (\d+) kicks`).FindStringSubmatch(s)
	if m == nil {
		t.Fatalf("no counts in %q", s)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[i]); return v }
	return n(1), n(2), n(3), n(4)
}

// scrape reads /metrics into "name{label="value",...}" → value, labels
// sorted by name as the text format writes them.
func scrape(t *testing.T, base string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	out := map[string]float64{}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+strconv.Quote(l.GetValue()))
			}
			key := name
			if len(ls) > 0 {
				key += "{" + strings.Join(ls, ",") + "}"
			}
			switch {
			case m.Counter != nil:
				out[key] = m.GetCounter().GetValue()
			case m.Gauge != nil:
				out[key] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
