package dashboard_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/httpapi"
)

// TestBrowserKnowsItsToken logs in with a read-only token and with an
// admin token: for the read-only one every action it may not take is
// disabled, saying which scope it needs; for the admin all are enabled.
func TestBrowserKnowsItsToken(t *testing.T) {
	chromium := findChromium(t)
	s := newLoginServer(t)
	viewer := `{"name":"viewer","sha256":"` + auth.HashToken("viewer-token") + `","scopes":["read"],"topics":["*"]}`
	ops := strings.Replace(opsEntry, "%s", auth.HashToken("ops-token"), 1)
	if err := os.WriteFile(s.authFile, []byte(`{"tokens":[`+ops+`,`+viewer+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	for _, r := range []putSpec{{"b1", 0}, {"d1", time.Hour}} {
		putJob(t, s, r)
	}
	buryOne(t, s, "b1")

	bctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	bctx = newBrowser(t, bctx, chromium)
	acceptDialogs(bctx)
	login := func(token string) {
		run(t, bctx, chromedp.Navigate(s.url+"/ui/#/topic/shop%2Forders"), chromedp.WaitVisible(chromedp.ID("login-token")),
			chromedp.SendKeys(chromedp.ID("login-token"), token), chromedp.Click(chromedp.CSS("#login button[type=submit]")),
			chromedp.WaitVisible(chromedp.ID("kick-topic")))
	}
	// denied lists the controls of the page that are disabled with a
	// reason, as "selector: reason".
	denied := func(selectors ...string) map[string]string {
		out := map[string]string{}
		for _, sel := range selectors {
			got := eval[[]string](t, bctx, `(() => { const e = document.querySelector(`+jsString(sel)+`); return e ? [String(e.disabled), e.title] : ['absent', '']; })()`)
			if got[0] == "true" {
				out[sel] = got[1]
			} else if got[0] == "absent" {
				out[sel] = "absent"
			}
		}
		return out
	}
	topicControls := []string{"#kick-submit", "#fire-submit", "#pause-topic button", "#policy-save", "#bulk-retry", "#bulk-delete"}

	login("viewer-token")
	if got := text(t, bctx, "#user-scopes"); got != "(read on *)" {
		t.Errorf("the header shows the scopes %q, want (read on *)", got)
	}
	// Tick the buried job, so the bulk buttons would be enabled.
	run(t, bctx, chromedp.Click(chromedp.CSS(`input.pick[value="b1"]`)))
	want := map[string]string{
		"#kick-submit":        "Your token needs the admin scope",
		"#fire-submit":        "Your token needs the admin scope",
		"#pause-topic button": "Your token needs the admin scope",
		"#policy-save":        "Your token needs the admin scope",
		"#bulk-retry":         "Your token needs the admin scope",
		"#bulk-delete":        "Your token needs the produce scope",
	}
	if diff := cmp.Diff(want, denied(topicControls...)); diff != "" {
		t.Errorf("a read-only token's topic page, disabled controls (-want +got):\n%s", diff)
	}
	if got := text(t, bctx, "#kick-topic"); !strings.Contains(got, "(your token needs the admin scope)") {
		t.Errorf("the retry form says %q, want the reason beside it", got)
	}
	run(t, bctx, chromedp.Navigate(s.url+"/ui/#/job/b1"), chromedp.WaitVisible(chromedp.ID("kick")))
	if diff := cmp.Diff(map[string]string{
		"#kick":                           "Your token needs the admin scope",
		"#delete":                         "Your token needs the produce scope",
		"#reschedule button[type=submit]": "Your token needs the admin scope",
	}, denied("#kick", "#delete", "#reschedule button[type=submit]")); diff != "" {
		t.Errorf("a read-only token's job page (-want +got):\n%s", diff)
	}
	run(t, bctx, chromedp.Navigate(s.url+"/ui/#/schedules"), chromedp.WaitVisible(chromedp.ID("schedule-save")))
	if got := denied("#schedule-save"); got["#schedule-save"] != "Your token needs the admin scope on every topic" {
		t.Errorf("a read-only token's schedule form: %v", got)
	}
	run(t, bctx, chromedp.Navigate(s.url+"/ui/#/alarms"), chromedp.WaitVisible(chromedp.ID("alarm-save")))
	if got := denied("#alarm-save"); got["#alarm-save"] != "Your token needs the admin scope on every topic" {
		t.Errorf("a read-only token's alarm form: %v", got)
	}
	shot(t, bctx, "delayq-dashboard-read-only.png")

	// The admin token: nothing disabled for want of a scope.
	run(t, bctx, chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login-token")))
	login("ops-token")
	run(t, bctx, chromedp.Click(chromedp.CSS(`input.pick[value="b1"]`)))
	if got := denied(topicControls...); len(got) != 0 {
		t.Errorf("an admin token's topic page disables %v", got)
	}
}

// putSpec is one job putJob puts in shop/orders.
type putSpec struct {
	id    string
	delay time.Duration
}

func putJob(t *testing.T, s *loginServer, p putSpec) {
	t.Helper()
	if _, err := s.e.Put(t.Context(), []engineReq{{Topic: "shop/orders", ID: p.id, Body: []byte("x"), TTR: ptr(time.Minute), Delay: &p.delay}}); err != nil {
		t.Fatal(err)
	}
}

// buryOne reserves job id of shop/orders (the only ready one) and buries it.
func buryOne(t *testing.T, s *loginServer, id string) {
	t.Helper()
	jobs, err := s.e.Reserve(t.Context(), reserveReq("shop/orders"))
	if err != nil || len(jobs) != 1 || jobs[0].ID != id {
		t.Fatalf("reserve = %v, %v; want %s", jobs, err, id)
	}
	if _, err := s.e.Bury(t.Context(), buryReq(jobs[0])); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserRetryIsNotFire: the topic page's Retry kicks buried jobs
// only and leaves the delayed ones; with nothing buried it is disabled.
func TestBrowserRetryIsNotFire(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	for _, id := range []string{"b1", "b2"} {
		post(t, srv.URL+"/v1/topics/q/jobs", `{"id":"`+id+`","body":"x"}`, nil)
		var r api.JobsResponse
		post(t, srv.URL+"/v1/reserve", `{"topics":["q"]}`, &r)
		post(t, srv.URL+"/v1/jobs/"+r.Jobs[0].ID+"/bury", `{"reservation":"`+r.Jobs[0].Reservation+`"}`, nil)
	}
	for _, id := range []string{"d1", "d2", "d3"} {
		post(t, srv.URL+"/v1/topics/q/jobs", `{"id":"`+id+`","body":"x","delay":"1h"}`, nil)
	}
	post(t, srv.URL+"/v1/topics/later/jobs", `{"id":"l1","body":"x","delay":"1h"}`, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/q"), chromedp.WaitVisible(chromedp.ID("kick-topic")))
	if n := eval[string](t, ctx, `document.getElementById('kick-n').value`); n != "2" {
		t.Errorf("retry offers %s jobs, want the 2 buried", n)
	}
	// Ask for more than are buried: the delayed ones stay.
	run(t, ctx, chromedp.SetValue(chromedp.ID("kick-n"), "10"), chromedp.Click(chromedp.ID("kick-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if got := text(t, ctx, "#notice"); got != "Retried 2 buried job(s) of q: they are ready." {
		t.Errorf("notice after retry = %q", got)
	}
	if tp := getTopic(t, srv.URL, "q"); tp.Buried != 0 || tp.Ready != 2 || tp.Delayed != 3 {
		t.Errorf("after the dashboard's retry: %+v; want 2 ready, 3 still delayed", tp)
	}
	// Nothing buried: the retry is disabled and says so.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/later"), chromedp.WaitVisible(chromedp.CSS(`#kick-topic`)),
		chromedp.Poll[chromedp.Void](`document.querySelector('h1 code')?.textContent === 'later'`))
	if got := eval[[]string](t, ctx, `[String(document.getElementById('kick-submit').disabled), document.getElementById('kick-submit').title]`); got[0] != "true" || got[1] != "No buried job to retry" {
		t.Errorf("retry with nothing buried: disabled %s, title %q", got[0], got[1])
	}
	if tp := getTopic(t, srv.URL, "later"); tp.Delayed != 1 {
		t.Errorf("topic later: %+v, want its delayed job kept", tp)
	}
}

// TestBrowserFireDelayed fires delayed jobs early with the page's own,
// separate action (a kick of state delayed), after a confirmation that
// names how many.
func TestBrowserFireDelayed(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	for _, id := range []string{"d1", "d2", "d3"} {
		post(t, srv.URL+"/v1/topics/q/jobs", `{"id":"`+id+`","body":"x","delay":"1h"}`, nil)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/q"), chromedp.WaitVisible(chromedp.ID("fire-delayed")),
		chromedp.SetValue(chromedp.ID("fire-n"), "2"), chromedp.Click(chromedp.ID("fire-submit")),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if msg := <-confirms; !strings.Contains(msg, "Fire 2 delayed job(s) of q now") {
		t.Errorf("fire asked %q, want a question naming 2 delayed jobs", msg)
	}
	if got := text(t, ctx, "#notice"); got != "Fired 2 delayed job(s) of q early: they are ready." {
		t.Errorf("notice after fire = %q", got)
	}
	if tp := getTopic(t, srv.URL, "q"); tp.Ready != 2 || tp.Delayed != 1 {
		t.Errorf("after firing 2: %+v", tp)
	}
}

func getTopic(t *testing.T, base, name string) api.Topic {
	t.Helper()
	var tp api.Topic
	status, body := getBody(t, base+"/v1/topics/"+name)
	if status != http.StatusOK || json.Unmarshal([]byte(body), &tp) != nil {
		t.Fatalf("GET topic %s = %d %s", name, status, body)
	}
	return tp
}

// TestBrowserBulkActions ticks jobs of a topic and retries the buried
// ones, then deletes two, each checked over the API.
func TestBrowserBulkActions(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	for _, id := range []string{"b1", "b2", "b3"} {
		post(t, srv.URL+"/v1/topics/q/jobs", `{"id":"`+id+`","body":"x"}`, nil)
		var r api.JobsResponse
		post(t, srv.URL+"/v1/reserve", `{"topics":["q"]}`, &r)
		post(t, srv.URL+"/v1/jobs/"+r.Jobs[0].ID+"/bury", `{"reservation":"`+r.Jobs[0].Reservation+`"}`, nil)
	}
	post(t, srv.URL+"/v1/topics/q/jobs", `{"id":"d1","body":"x","delay":"1h"}`, nil)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/q"), chromedp.WaitVisible(chromedp.CSS(`input.pick[value="b1"]`)),
		chromedp.Click(chromedp.CSS(`input.pick[value="b1"]`)), chromedp.Click(chromedp.CSS(`input.pick[value="b2"]`)),
		chromedp.Click(chromedp.CSS(`input.pick[value="d1"]`)))
	if got := text(t, ctx, "#bulk-retry"); got != "Retry 2 buried" {
		t.Errorf("retry button with b1, b2 and d1 ticked says %q", got)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("bulk-retry")), chromedp.WaitVisible(chromedp.ID("notice")))
	if got := text(t, ctx, "#notice"); got != "Retried 2 of 2 job(s) of q." {
		t.Errorf("notice after bulk retry = %q", got)
	}
	for id, want := range map[string]string{"b1": "ready", "b2": "ready", "b3": "buried", "d1": "delayed"} {
		if j := getJob(t, srv.URL+"/v1/jobs/"+id); j.State != want {
			t.Errorf("after bulk retry %s is %s, want %s", id, j.State, want)
		}
	}
	// Select all, then untick b1: delete the other three.
	run(t, ctx, chromedp.Click(chromedp.ID("pick-all")), chromedp.Click(chromedp.CSS(`input.pick[value="b1"]`)),
		chromedp.Click(chromedp.ID("bulk-delete")), chromedp.WaitVisible(chromedp.ID("notice")),
		chromedp.Poll[chromedp.Void](`document.getElementById('notice').textContent.startsWith('Deleted')`))
	if msg := <-confirms; !strings.Contains(msg, "Delete 3 job(s) of q") {
		t.Errorf("bulk delete asked %q", msg)
	}
	if got := text(t, ctx, "#notice"); got != "Deleted 3 of 3 job(s) of q." {
		t.Errorf("notice after bulk delete = %q", got)
	}
	for id, want := range map[string]string{"b1": "ready", "b2": "deleted", "b3": "failed", "d1": "deleted"} {
		if j := getJob(t, srv.URL+"/v1/jobs/"+id); j.State != want {
			t.Errorf("after bulk delete %s is %s, want %s", id, j.State, want)
		}
	}
}

// TestBrowserScheduleAndAlarmForms creates a schedule and an alarm in
// the dashboard's forms, then edits each, checking the API every time.
func TestBrowserScheduleAndAlarmForms(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(hook.Close)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/schedules"), chromedp.WaitVisible(chromedp.ID("schedule-form")),
		chromedp.SendKeys(chromedp.ID("sched-name"), "nightly"), chromedp.SendKeys(chromedp.ID("sched-topic"), "reports"),
		chromedp.SendKeys(chromedp.ID("sched-cron"), "0 30 2 * * *"), chromedp.SendKeys(chromedp.ID("sched-timezone"), "Europe/Berlin"),
		chromedp.SendKeys(chromedp.ID("sched-body"), "run"), chromedp.Click(chromedp.ID("schedule-save")),
		chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="nightly"]`)))
	if got := text(t, ctx, "#notice"); got != "Saved schedule nightly." {
		t.Errorf("notice after create = %q", got)
	}
	if s := getSchedule(t, srv.URL+"/v1/schedules/nightly"); s.Topic != "reports" || s.Cron != "0 30 2 * * *" || s.Timezone != "Europe/Berlin" || s.Body == nil || *s.Body != "run" {
		t.Errorf("schedule created in the dashboard: %+v", s)
	}
	// Edit: the form takes the schedule's values; change it to every 2h.
	run(t, ctx, chromedp.Click(chromedp.CSS(`#schedules tr[data-schedule="nightly"] button.edit`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('schedule-form-title').textContent === 'Edit schedule nightly'`))
	if got := eval[[]string](t, ctx, `['sched-name','sched-topic','sched-cron','sched-timezone','sched-body'].map((id) => document.getElementById(id).value)`); !cmp.Equal(got, []string{"nightly", "reports", "0 30 2 * * *", "Europe/Berlin", "run"}) {
		t.Errorf("edit form holds %q", got)
	}
	setValues(t, ctx, map[string]string{"sched-cron": "", "sched-every": "2h"})
	run(t, ctx, chromedp.Click(chromedp.ID("schedule-save")),
		chromedp.Poll[chromedp.Void](`document.querySelector('#schedules tr[data-schedule="nightly"] td:nth-child(3)')?.textContent === '@every 2h0m0s'`))
	if s := getSchedule(t, srv.URL+"/v1/schedules/nightly"); s.Cron != "@every 2h0m0s" || s.Topic != "reports" {
		t.Errorf("schedule after the dashboard's edit: %+v", s)
	}

	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/alarms"), chromedp.WaitVisible(chromedp.ID("alarm-form")),
		chromedp.SendKeys(chromedp.ID("alarm-name"), "dead"), chromedp.SendKeys(chromedp.ID("alarm-url"), hook.URL),
		chromedp.SendKeys(chromedp.ID("alarm-topics"), "shop/*, mail"), chromedp.SendKeys(chromedp.ID("alarm-buried_over"), "5"),
		chromedp.SendKeys(chromedp.ID("alarm-repeat"), "10m"), chromedp.Click(chromedp.ID("alarm-save")),
		chromedp.WaitVisible(chromedp.CSS(`#alarms tr[data-alarm="dead"]`)))
	a := getAlarm(t, srv.URL+"/v1/alarms/dead")
	if !cmp.Equal(a.Topics, []string{"shop/*", "mail"}) || a.When.BuriedOver == nil || *a.When.BuriedOver != 5 || a.Repeat == nil || a.URL != hook.URL {
		t.Errorf("alarm created in the dashboard: %+v", a)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#alarms tr[data-alarm="dead"] button.edit`)),
		chromedp.Poll[chromedp.Void](`document.getElementById('alarm-form-title').textContent === 'Edit alarm dead'`))
	setValues(t, ctx, map[string]string{"alarm-buried_over": "", "alarm-oldest_ready_over": "5m"})
	run(t, ctx, chromedp.Click(chromedp.ID("alarm-save")),
		chromedp.Poll[chromedp.Void](`document.querySelector('#alarms tr[data-alarm="dead"] td:nth-child(4)')?.textContent === 'oldest_ready_over 5m0s'`))
	if a := getAlarm(t, srv.URL+"/v1/alarms/dead"); a.When.BuriedOver != nil || a.When.OldestReadyOver == nil || !cmp.Equal(a.Topics, []string{"shop/*", "mail"}) {
		t.Errorf("alarm after the dashboard's edit: %+v", a)
	}
}

func getAlarm(t *testing.T, url string) api.Alarm {
	t.Helper()
	var a api.Alarm
	status, body := getBody(t, url)
	if status != http.StatusOK || json.Unmarshal([]byte(body), &a) != nil {
		t.Fatalf("GET %s = %d %s", url, status, body)
	}
	return a
}

// TestBrowserOverview: every topic's counts with its recent fires,
// failed attempts and lateness, the instances with their timer buckets
// (two instances, as over Redis), one time format, and a not-found
// page for a route the dashboard does not have.
func TestBrowserOverview(t *testing.T) {
	chromium := findChromium(t)
	since := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	a := newAPIsWith(t, func(o *httpapi.Options) {
		o.Cluster = func(context.Context) ([]delayq.Instance, error) {
			return []delayq.Instance{
				{URL: "http://10.0.0.1:7480", Protocols: []string{"http", "beanstalk"}, Buckets: []int{0, 1, 2, 3, 7}, Since: since},
				{URL: "http://10.0.0.2:7480", Protocols: []string{"http"}, Buckets: []int{4, 5, 6}, Since: since},
			}, nil
		}
	})
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	base := srv.URL + "/v1/topics/q"
	post(t, base+"/jobs", `{"id":"f1","body":"x","delay":"50ms"}`, nil)
	var r api.JobsResponse
	waitHistory(t, base, "the fire sampled", func(h api.TopicHistory) bool { return fires(h) == 1 })
	post(t, srv.URL+"/v1/reserve", `{"topics":["q"]}`, &r)
	post(t, srv.URL+"/v1/jobs/f1/release", `{"reservation":"`+r.Jobs[0].Reservation+`"}`, nil)
	waitHistory(t, base, "the failed attempt sampled", func(h api.TopicHistory) bool {
		n := 0
		for _, s := range h.Samples {
			n += s.Failures
		}
		return n == 1
	})
	put(t, srv.URL+"/v1/schedules/beat", `{"topic":"q","every":"1h"}`)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`#topics tr[data-topic="q"]`)),
		chromedp.WaitVisible(chromedp.ID("cluster")))
	row := eval[map[string]string](t, ctx, `Object.fromEntries([...document.querySelectorAll('#topics tr[data-topic="q"] td[data-col]')].map((td) => [td.dataset.col, td.textContent]))`)
	if row["failures"] != "1" || row["fires"] == "–" || row["fires"] == "0" || !strings.HasSuffix(row["lateness"], "ms") {
		t.Errorf("overview row of q = %v; want 1 failed attempt, a fire rate and a lateness", row)
	}
	if diff := cmp.Diff([][]string{
		{"http://10.0.0.1:7480", "http, beanstalk", "5 (0-3, 7)"},
		{"http://10.0.0.2:7480", "http", "3 (4-6)"},
	}, evalRows(t, ctx, "#cluster", 3)); diff != "" {
		t.Errorf("instances (-want +got):\n%s", diff)
	}
	shot(t, ctx, "delayq-dashboard-overview.png")

	// One time format, with its zone, on every page that shows times.
	// A clock time: not part of an address (10.0.0.1:7480) or a longer number.
	stamp := regexp.MustCompile(`(?:^|[^\d.:])(\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?(?: ?[AP]M| UTC)?)(?:[^\d]|$)`)
	good := regexp.MustCompile(`^\d{2}:\d{2}:\d{2} UTC$`)
	checkTimes := func(page string) {
		t.Helper()
		txt := eval[string](t, ctx, `document.body.innerText`)
		found := stamp.FindAllStringSubmatch(txt, -1)
		if len(found) == 0 {
			t.Errorf("%s shows no time", page)
		}
		for _, m := range found {
			if s := m[1]; !good.MatchString(s) {
				t.Errorf("%s shows the time %q, want hh:mm:ss UTC", page, s)
			}
		}
	}
	if got := text(t, ctx, `#cluster tbody tr td:nth-child(4) .time`); !strings.HasPrefix(got, "2026-01-02 15:04:05 UTC") {
		t.Errorf("instance since = %q", got)
	}
	checkTimes("the overview")
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/job/f1"), chromedp.WaitVisible(chromedp.CSS(`#attempts tbody tr[data-attempt="1"]`)))
	checkTimes("a job's page")
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/schedules"), chromedp.WaitVisible(chromedp.CSS(`#schedules tr[data-schedule="beat"]`)))
	checkTimes("the schedules")
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/q"), chromedp.WaitVisible(chromedp.CSS("#chart-states canvas")))
	hover(t, ctx, "#chart-states .u-over")
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#chart-states .u-tooltip")))
	if tip := text(t, ctx, "#chart-states .u-tooltip .tt-x"); !regexp.MustCompile(`^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2} UTC$`).MatchString(tip) {
		t.Errorf("chart tooltip time = %q, want the page's format", tip)
	}

	// An unknown route: a not-found page, not the overview.
	for _, route := range []string{"#/nosuch", "#/topics", "#/job/a/b"} {
		run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"+route), chromedp.WaitVisible(chromedp.ID("not-found")))
		if got := text(t, ctx, "#view h1"); got != "Page not found" {
			t.Errorf("%s shows %q", route, got)
		}
		if n := eval[int](t, ctx, `document.querySelectorAll('#topics').length`); n != 0 {
			t.Errorf("%s shows the topics table", route)
		}
	}
}

// TestBrowserChartWindowFitsData: on a fresh server, whose history is
// seconds old, the charts span that history, not the hour chosen.
func TestBrowserChartWindowFitsData(t *testing.T) {
	chromium := findChromium(t)
	s := newLoginServer(t) // keeps an hour, as the server does by default
	for _, delay := range []time.Duration{0, 50 * time.Millisecond} {
		if _, err := s.e.Put(t.Context(), []engineReq{{Topic: "fresh", Body: []byte("x"), TTR: ptr(time.Minute), Delay: &delay}}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx)
	run(t, ctx, chromedp.Navigate(s.url+"/ui/#/topic/fresh"), chromedp.WaitVisible(chromedp.ID("login-token")),
		chromedp.SendKeys(chromedp.ID("login-token"), "ops-token"), chromedp.Click(chromedp.CSS("#login button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS(`#charts[data-range="3600"] #chart-states canvas`)))
	w := eval[string](t, ctx, `document.getElementById('charts').dataset.window || ''`)
	max := int(30*sampleInterval/time.Second) + 5 // MIN_WINDOW buckets, and the seconds the test took
	if w == "" || w == "3600" || len(w) > 3 {
		t.Fatalf("a fresh server's charts span %q s of the hour chosen, want the history's span (under %d s)", w, max)
	}
	if got := text(t, ctx, "#chart-fires .window"); !strings.HasPrefix(got, "History since ") {
		t.Errorf("fires chart note = %q, want the span it shows", got)
	}
}

// engineReq is the engine's put request, named short for the tests.
type engineReq = engine.PutRequest

func reserveReq(topic string) engine.ReserveRequest {
	return engine.ReserveRequest{Topics: []string{topic}, By: "test"}
}

func buryReq(j *delayq.Job) engine.BuryRequest {
	return engine.BuryRequest{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Reason: "declined"}
}

// setValues sets inputs by id, as typing would leave them, and tells
// their listeners.
func setValues(t *testing.T, ctx context.Context, values map[string]string) {
	t.Helper()
	b, _ := json.Marshal(values)
	eval[bool](t, ctx, `(() => { for (const [id, v] of Object.entries(`+string(b)+`)) { const e = document.getElementById(id); e.value = v; e.dispatchEvent(new Event('input', { bubbles: true })); } return true; })()`)
}
