package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq/api"
)

// topic has the characters that must be percent-encoded in a URL.
const topic = "shop/orders(eu)$1"

// TestBrowser drives the dashboard in headless Chromium against a real
// server: topic counts, a topic's jobs with paging and state tabs, a job's
// detail, a delete confirmed in the browser's dialog, "run now", and an
// error message from the server.
func TestBrowser(t *testing.T) {
	chromium := findChromium(t)
	srv := httptest.NewServer(newAPI(t))
	t.Cleanup(srv.Close)
	seed(t, srv.URL)

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	confirms := acceptDialogs(ctx)

	// Overview: one row per topic, in name order, with its counts.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/"), chromedp.WaitVisible(chromedp.CSS("#topics tbody a.topic-link")))
	want := [][]string{
		{"mail", "1", "0", "0", "0"},
		{topic, "2", "2", "1", "1"},
	}
	got := evalRows(t, ctx, "#topics", 5)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("topics table (-want +got):\n%s", diff)
	}

	// A topic's jobs: the link percent-encodes the name; ready, delayed,
	// reserved, then buried; two per page.
	run(t, ctx, chromedp.Click(chromedp.CSS(`a[href="#/topic/shop%2Forders(eu)%241"]`)),
		chromedp.WaitVisible(chromedp.CSS("#jobs tbody a.job-link")))
	if got, want := jobIDs(t, ctx), []string{"a3", "a4", "d1", "d2", "a1", "a2"}; !cmp.Equal(got, want) {
		t.Errorf("jobs of %s = %v, want %v", topic, got, want)
	}
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/shop%2Forders(eu)%241?limit=2"),
		chromedp.WaitVisible(chromedp.ID("next-page")))
	var pages [][]string
	pages = append(pages, jobIDs(t, ctx))
	run(t, ctx, chromedp.Click(chromedp.ID("next-page")), chromedp.WaitVisible(chromedp.ID("first-page")))
	pages = append(pages, jobIDs(t, ctx))
	if diff := cmp.Diff([][]string{{"a3", "a4"}, {"d1", "d2"}}, pages); diff != "" {
		t.Errorf("pages of two jobs (-want +got):\n%s", diff)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#states a[href*="state=buried"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#states a.current[href*="state=buried"]`)))
	if got := jobIDs(t, ctx); !cmp.Equal(got, []string{"a2"}) {
		t.Errorf("buried jobs of %s = %v, want [a2]", topic, got)
	}
	shot(t, ctx, "delayq-dashboard-topic.png")

	// The buried job's detail, then delete it.
	run(t, ctx, chromedp.Click(chromedp.CSS(`a.job-link[href="#/job/a2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#job dd[data-field="state"]`)))
	if state := text(t, ctx, `#job dd[data-field="state"]`); state != "buried" {
		t.Errorf("job a2 shows state %q, want buried", state)
	}
	if body := text(t, ctx, "#body"); body != "<b>a2</b>" {
		t.Errorf("job a2 shows body %q, want the text <b>a2</b>", body)
	}
	// Why it was buried, as the consumer said, shown as text.
	if reason := text(t, ctx, `#job dd[data-field="last reason"]`); reason != "card <i>declined</i>" {
		t.Errorf("job a2 shows last reason %q, want the consumer's text", reason)
	}
	if counts := text(t, ctx, `#job dd[data-field="counts"]`); counts != "0 TTR expiries, 0 releases, 1 buries, 0 kicks" {
		t.Errorf("job a2 shows counts %q", counts)
	}
	run(t, ctx, chromedp.Click(chromedp.ID("delete")), chromedp.WaitVisible(chromedp.ID("notice")))
	if msg := <-confirms; !strings.Contains(msg, "a2") {
		t.Errorf("delete asked %q, want a question naming job a2", msg)
	}
	if n := text(t, ctx, "#notice"); n != "Deleted job a2." {
		t.Errorf("notice after delete = %q", n)
	}
	if j := getJob(t, srv.URL+"/v1/jobs/a2"); j.State != "failed" || j.EndedAt == nil {
		t.Fatalf("GET /v1/jobs/a2 after delete in the dashboard: state %q, ended %v; want failed (deleted while buried), kept", j.State, j.EndedAt)
	}

	// The ended jobs: the Failed tab lists a2, and its page shows when it
	// ended and its attempt (by the client's address, buried with the
	// consumer's reason), read-only.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/shop%2Forders(eu)%241"),
		chromedp.WaitVisible(chromedp.CSS(`#states a[data-state="failed"]`)),
		chromedp.Click(chromedp.CSS(`#states a[data-state="failed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#states a.current[data-state="failed"]`)),
		chromedp.WaitVisible(chromedp.ID("ended-note")))
	if got := jobIDs(t, ctx); !cmp.Equal(got, []string{"a2"}) {
		t.Errorf("failed jobs of %s = %v, want [a2]", topic, got)
	}
	if head := text(t, ctx, "#jobs thead"); !strings.Contains(head, "Ended") {
		t.Errorf("failed jobs' table head = %q, want an Ended column", head)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`a.job-link[href="#/job/a2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#attempts tbody tr[data-attempt="1"]`)))
	if state := text(t, ctx, `#job dd[data-field="state"]`); state != "failed" {
		t.Errorf("job a2 after delete shows state %q, want failed", state)
	}
	if ended := text(t, ctx, `#job dd[data-field="ended"]`); !strings.Contains(ended, "ago") && !strings.Contains(ended, "now") {
		t.Errorf("job a2 shows ended %q, want when it ended", ended)
	}
	attempts := evalRows(t, ctx, "#attempts", 6)
	if len(attempts) != 1 || attempts[0][0] != "1" || !strings.HasPrefix(attempts[0][2], "http 127.0.0.1:") ||
		attempts[0][4] != "buried" || attempts[0][5] != "card <i>declined</i>" {
		t.Errorf("job a2's attempts = %q, want attempt 1 by the client's address, buried, with the consumer's reason", attempts)
	}
	if n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll('#delete, #kick, #reschedule').length`)); err != nil || n != 0 {
		t.Errorf("job a2 (ended) offers %d actions (%v), want none", n, err)
	}

	// A finished job: the Finished tab and its attempt.
	post(t, srv.URL+"/v1/topics/done/jobs", `{"id":"f1","body":"paid"}`, nil)
	var f api.JobsResponse
	post(t, srv.URL+"/v1/reserve", `{"topics":["done"]}`, &f)
	post(t, srv.URL+"/v1/jobs/f1/finish", `{"reservation":"`+f.Jobs[0].Reservation+`"}`, nil)
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/topic/done?state=finished"),
		chromedp.WaitVisible(chromedp.CSS(`#states a.current[data-state="finished"]`)),
		chromedp.WaitVisible(chromedp.CSS(`a.job-link[href="#/job/f1"]`)))
	shot(t, ctx, "delayq-dashboard-finished.png")
	run(t, ctx, chromedp.Click(chromedp.CSS(`a.job-link[href="#/job/f1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#attempts tbody tr[data-attempt="1"]`)))
	if attempts := evalRows(t, ctx, "#attempts", 6); len(attempts) != 1 || attempts[0][4] != "finished" {
		t.Errorf("job f1's attempts = %q, want one, finished", attempts)
	}
	shot(t, ctx, "delayq-dashboard-attempts.png")
	status, msg := getError(t, srv.URL+"/v1/jobs/nosuch")
	if status != http.StatusNotFound {
		t.Fatalf("GET /v1/jobs/nosuch = %d, want 404", status)
	}

	// Run a delayed job now: it becomes ready at once.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/job/d1"), chromedp.Click(chromedp.ID("run-now")),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if n := text(t, ctx, "#notice"); n != "Job d1 is due now." {
		t.Errorf("notice after run now = %q", n)
	}
	if state := text(t, ctx, `#job dd[data-field="state"]`); state != "ready" {
		t.Errorf("job d1 after run now shows state %q, want ready", state)
	}
	if j := getJob(t, srv.URL+"/v1/jobs/d1"); j.State != "ready" {
		t.Errorf("GET /v1/jobs/d1 after run now: state %q, want ready", j.State)
	}

	// Reschedule in the page's own form (no browser prompt): d2 is due
	// in two hours.
	// d1's page has the same form: wait for d2's page before filling it,
	// or the value goes into d1's form just before d2's replaces it.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/job/d2"))
	pollPage(t, ctx, `document.querySelector('#job dd[data-field="id"]')?.textContent === 'd2'`)
	run(t, ctx, chromedp.WaitVisible(chromedp.ID("reschedule-delay")),
		chromedp.SetValue(chromedp.ID("reschedule-delay"), "2h"), chromedp.Click(chromedp.CSS("#reschedule button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("notice")))
	if n := text(t, ctx, "#notice"); n != "Job d2 rescheduled to run in 2h." {
		t.Errorf("notice after reschedule = %q", n)
	}
	if j := getJob(t, srv.URL+"/v1/jobs/d2"); time.Until(j.Due.Time) < 119*time.Minute {
		t.Errorf("GET /v1/jobs/d2 after reschedule: due %v, want in 2 hours", j.Due.Time)
	}

	// The server's error message reaches the operator.
	run(t, ctx, chromedp.Navigate(srv.URL+"/ui/#/job/nosuch"), chromedp.WaitVisible(chromedp.ID("error")))
	if got := text(t, ctx, "#error"); got != msg {
		t.Errorf("error shown for an unknown job = %q, want the server's message %q", got, msg)
	}
}

// findChromium returns the browser's path. Without one the test skips,
// except in CI, where it must run.
func findChromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (scripts/deps.sh installs it); the browser test must run in CI")
	}
	t.Skip("chromium is not installed: apt-get install chromium (or run scripts/deps.sh) to run the browser test")
	return ""
}

// newBrowser starts a headless Chromium with a throwaway profile and
// returns a context with one tab; the browser ends with the test.
func newBrowser(t *testing.T, ctx context.Context, path string) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.WindowSize(1100, 700),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(ctx, opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	return bctx
}

// acceptDialogs answers yes to every confirm() and sends its message.
func acceptDialogs(ctx context.Context) <-chan string {
	messages := make(chan string, 4)
	dialogs := chromedp.Events(ctx, page.JavascriptDialogOpening)
	go func() {
		for ev, err := range dialogs {
			if err != nil {
				return
			}
			select {
			case messages <- ev.Message:
			default:
			}
			// Answer from another goroutine than the one reading events.
			go func() {
				_, _ = chromedp.Call(ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	}()
	return messages
}

func run(t *testing.T, ctx context.Context, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, 20*time.Second) // a bound, not a wait: a loaded CI machine renders slowly
	defer cancel()
	if err := chromedp.Do(step, actions...); err != nil {
		t.Fatalf("browser: %v; the page shows:\n%s", err, pageText(ctx))
	}
}

// pageText is what the page shows, for a failure's message.
func pageText(ctx context.Context) string {
	page, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`location.hash + "\n" + document.body.innerText`))
	return page
}

// pollPage waits until the JavaScript expression is true on the page.
// A poll begun just after a navigation can be given the execution
// context of the page before it, which the browser has destroyed
// ("Cannot find context with specified id", "Execution context was
// destroyed"): chromedp learns of the new one by an event that may come
// after the load it waited for. Such a poll is begun again, in the new
// context, until the expression holds or the step's bound ends.
func pollPage(t *testing.T, ctx context.Context, expr string) {
	t.Helper()
	step, cancel := context.WithTimeout(ctx, 20*time.Second) // a bound, as in run
	defer cancel()
	for {
		err := chromedp.Do(step, chromedp.Poll[chromedp.Void](expr))
		if err == nil {
			return
		}
		if step.Err() == nil && (strings.Contains(err.Error(), "Cannot find context with specified id") ||
			strings.Contains(err.Error(), "Execution context was destroyed")) {
			continue
		}
		t.Fatalf("browser: waiting for %s: %v; the page shows:\n%s", expr, err, pageText(ctx))
	}
}

func text(t *testing.T, ctx context.Context, css string) string {
	t.Helper()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(`+jsString(css)+`).textContent`))
	if err != nil {
		t.Fatalf("reading %s: %v", css, err)
	}
	return s
}

// evalRows returns the first n cells' text of each body row of a table.
func evalRows(t *testing.T, ctx context.Context, table string, n int) [][]string {
	t.Helper()
	rows, err := chromedp.Run(ctx, chromedp.Evaluate[[][]string](
		`[...document.querySelectorAll(`+jsString(table+" tbody tr")+`)].map(tr => [...tr.cells].slice(0, `+
			jsNumber(n)+`).map(td => td.textContent))`))
	if err != nil {
		t.Fatalf("reading %s: %v", table, err)
	}
	return rows
}

func jobIDs(t *testing.T, ctx context.Context) []string {
	t.Helper()
	var ids []string
	for _, row := range evalRows(t, ctx, "#jobs", 1) {
		ids = append(ids, row[0])
	}
	return ids
}

// shot saves a screenshot named name into $DELAYQ_SCREENSHOTS when that
// names a directory (to look at the page after the run), else into the
// test's temporary directory: a test writes nothing outside its own.
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	dir := os.Getenv("DELAYQ_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, name)
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func jsString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func jsNumber(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// seed puts jobs in every state over the API. In topic: a1..a4 ready (a1
// then reserved, a2 reserved and buried), d1 and d2 delayed by an hour;
// in mail: one ready job.
func seed(t *testing.T, base string) {
	t.Helper()
	enc := "shop%2Forders(eu)%241"
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		post(t, base+"/v1/topics/"+enc+"/jobs", `{"id":"`+id+`","body":"<b>`+id+`</b>"}`, nil)
	}
	for _, id := range []string{"d1", "d2"} {
		post(t, base+"/v1/topics/"+enc+"/jobs", `{"id":"`+id+`","body":"later","delay":"1h"}`, nil)
	}
	post(t, base+"/v1/topics/mail/jobs", `{"id":"m1","body_base64":"/w=="}`, nil)
	var first, second api.JobsResponse
	post(t, base+"/v1/reserve", `{"topics":["`+topic+`"]}`, &first)
	post(t, base+"/v1/reserve", `{"topics":["`+topic+`"]}`, &second)
	if len(first.Jobs) != 1 || first.Jobs[0].ID != "a1" || len(second.Jobs) != 1 || second.Jobs[0].ID != "a2" {
		t.Fatalf("reserves gave %+v and %+v, want a1 then a2", first.Jobs, second.Jobs)
	}
	post(t, base+"/v1/jobs/a2/bury", `{"reservation":"`+second.Jobs[0].Reservation+`","reason":"card <i>declined</i>"}`, nil)
}

func post(t *testing.T, url, body string, out any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("POST %s %s = %d %s", url, body, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
	}
}

func getJob(t *testing.T, url string) api.Job {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var j api.Job
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return j
}

// getError sends a GET and returns the status and the error message.
func getError(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e api.ErrorResponse
	_ = json.NewDecoder(resp.Body).Decode(&e)
	return resp.StatusCode, e.Error.Message
}
