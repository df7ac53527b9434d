package dashboard_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/delayq/delayq/internal/alarm"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/dashboard"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/schedule"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// loginServer is a real server with tokens from a file, the dashboard's
// sessions and a history that samples every sampleInterval and keeps an
// hour, as the server keeps by default.
type loginServer struct {
	url      string
	authFile string
	tokens   *auth.Store
	sessions *auth.Sessions
	e        *engine.Engine
}

const opsEntry = `{"name":"ops","sha256":"%s","scopes":["admin"]}`

func newLoginServer(t *testing.T) *loginServer {
	t.Helper()
	s := &loginServer{authFile: filepath.Join(t.TempDir(), "auth.json")}
	writeTokens(t, s.authFile, "ops-token")
	var err error
	if s.tokens, err = auth.Load(s.authFile, ""); err != nil {
		t.Fatal(err)
	}
	s.sessions = auth.NewSessions(s.tokens)
	st := memstore.New()
	log := slog.New(slog.DiscardHandler)
	hist := history.New(history.Config{Topics: st.Topics, Store: st, Logger: log, Interval: sampleInterval, Span: time.Hour})
	s.e = engine.New(st, engine.Config{Logger: log, Fired: hist.Fired})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); _ = s.e.Run(ctx) }()
	go func() { defer func() { done <- struct{}{} }(); _ = hist.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; <-done; st.Close() })
	// Schedules and alarms are listed only (no loop runs them): the
	// pages need the endpoints.
	sched := schedule.New(store.Schedules(st), s.e, schedule.Config{Logger: log})
	alarms := alarm.New(st, alarm.Sources{Topics: s.e.Topics, LatenessP99: hist.LatenessP99}, alarm.Config{Logger: log, AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(alarms.Close)
	api := httpapi.NewHandler(s.e, httpapi.Options{UI: dashboard.Handler(), Logger: log, History: hist, Sessions: s.sessions, Schedules: sched, Alarms: alarms})
	srv := httptest.NewServer(httpapi.Guard(s.e, api, httpapi.GuardOptions{Auth: s.tokens, Sessions: s.sessions, Logger: log}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// writeTokens writes an auth file holding the given admin tokens.
func writeTokens(t *testing.T, path string, tokens ...string) {
	t.Helper()
	var entries []string
	for _, tok := range tokens {
		entries = append(entries, strings.Replace(opsEntry, "%s", auth.HashToken(tok), 1))
	}
	if err := os.WriteFile(path, []byte(`{"tokens":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserLogin drives the dashboard of a server with tokens in
// headless Chromium: the login page (a wrong token, then the right one),
// the session cookie (HttpOnly, SameSite=Strict, out of the script's
// reach), a topic's uPlot charts with a tooltip, the range picker
// offering what the server keeps, logging out, and a reload that revokes
// the token sending the page back to the login.
func TestBrowserLogin(t *testing.T) {
	chromium := findChromium(t)
	s := newLoginServer(t)
	for _, delay := range []time.Duration{0, 0, 50 * time.Millisecond, time.Hour} {
		if _, err := s.e.Put(t.Context(), []engine.PutRequest{{Topic: "shop/orders", Body: []byte("x"), TTR: ptr(time.Minute), Delay: &delay}}); err != nil {
			t.Fatal(err)
		}
	}

	ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
	defer cancel()
	ctx = newBrowser(t, ctx, chromium)
	acceptDialogs(ctx) // starts the browser on ctx; no dialog may open
	run(t, ctx, chromedp.Navigate(s.url+"/ui/#/topic/shop%2Forders"), chromedp.WaitVisible(chromedp.ID("login-token")))
	if got := text(t, ctx, "#view h1"); got != "Log in" {
		t.Fatalf("a server with tokens shows %q first, want the login page", got)
	}

	// A wrong token: the server's message, no cookie.
	run(t, ctx, chromedp.SendKeys(chromedp.ID("login-token"), "wrong"), chromedp.Click(chromedp.CSS("#login button[type=submit]")),
		chromedp.WaitVisible(chromedp.ID("login-error")))
	if got := text(t, ctx, "#login-error"); !strings.Contains(got, "not valid") {
		t.Errorf("login with a wrong token says %q", got)
	}
	if c := sessionCookie(t, ctx); c != nil {
		t.Fatalf("a wrong token got a session cookie: %+v", c)
	}

	// The right one: the topic the URL named, with its charts.
	run(t, ctx, chromedp.SendKeys(chromedp.ID("login-token"), "ops-token"), chromedp.Click(chromedp.CSS("#login button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#chart-states canvas")))
	if got := text(t, ctx, "#user-name"); got != "ops" {
		t.Errorf("signed in as %q, want ops", got)
	}
	c := sessionCookie(t, ctx)
	if c == nil || !c.HTTPOnly || c.SameSite != network.CookieSameSiteStrict || c.Path != "/" || strings.Contains(c.Value, "ops-token") {
		t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/, not the token", c)
	}
	if got := eval[string](t, ctx, `document.cookie`); got != "" {
		t.Errorf("the script can read cookies %q", got)
	}
	for _, id := range []string{"chart-states", "chart-fires", "chart-lateness", "chart-due"} {
		run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#"+id+" canvas")))
	}

	// A tooltip follows the cursor over a chart, with each series' value.
	hover(t, ctx, "#chart-states .u-over")
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#chart-states .u-tooltip")))
	tip := text(t, ctx, "#chart-states .u-tooltip")
	for _, want := range []string{"ready 3", "delayed 1", "reserved 0", "buried 0"} {
		if !strings.Contains(tip, want) {
			t.Errorf("tooltip %q lacks %q", tip, want)
		}
	}
	hover(t, ctx, "#chart-due .u-over")
	run(t, ctx, chromedp.WaitVisible(chromedp.CSS("#chart-due .u-tooltip")))
	if tip := text(t, ctx, "#chart-due .u-tooltip"); !strings.Contains(tip, "delayed jobs") {
		t.Errorf("due tooltip = %q", tip)
	}

	// The range: everything the store keeps (a week) is offered.
	if got := eval[[]bool](t, ctx, `[...document.querySelectorAll('#chart-range button')].map(b => b.disabled)`); len(got) != 5 || slices.Contains(got, true) {
		t.Errorf("range buttons disabled = %v, want all five offered", got)
	}
	if got := eval[string](t, ctx, `document.querySelector('#chart-range button[data-range="86400"]').title`); got != "Show the last 24 hours" {
		t.Errorf("24 hours button says %q", got)
	}
	run(t, ctx, chromedp.Click(chromedp.CSS(`#chart-range button[data-range="900"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#charts[data-range="900"][data-span="900"] #chart-range button.current[data-range="900"]`)))
	if got := text(t, ctx, `#chart-fires li[data-series="fire-total"]`); !strings.HasPrefix(got, "fired in the last 15 min") {
		t.Errorf("fires legend after choosing 15 min = %q", got)
	}
	shot(t, ctx, "delayq-dashboard-login-charts.png")

	// Log out: the login page, no cookie, and the session is gone on the
	// server too.
	run(t, ctx, chromedp.Click(chromedp.ID("logout")), chromedp.WaitVisible(chromedp.ID("login-token")))
	if got := text(t, ctx, "#login-error"); got != "Logged out." {
		t.Errorf("after logout the page says %q", got)
	}
	if c := sessionCookie(t, ctx); c != nil {
		t.Errorf("the session cookie outlived the logout: %+v", c)
	}
	if n := s.sessions.Len(); n != 0 {
		t.Errorf("%d sessions on the server after logout", n)
	}

	// Log in again, then revoke the token: the next refresh of the page
	// meets 401 and shows the login.
	run(t, ctx, chromedp.Navigate(s.url+"/ui/#/"), chromedp.WaitVisible(chromedp.ID("login-token")),
		chromedp.SendKeys(chromedp.ID("login-token"), "ops-token"), chromedp.Click(chromedp.CSS("#login button[type=submit]")),
		chromedp.WaitVisible(chromedp.CSS("#topics tbody a.topic-link")))
	writeTokens(t, s.authFile, "other-token")
	if err := s.tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	run(t, ctx, chromedp.WaitVisible(chromedp.ID("login-token")))
	if got := text(t, ctx, "#login-error"); !strings.Contains(got, "session has ended") {
		t.Errorf("after the token's revocation the page says %q", got)
	}
}

// sessionCookie returns the browser's delayq_session cookie, or nil.
func sessionCookie(t *testing.T, ctx context.Context) *network.Cookie {
	t.Helper()
	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{})
	if err != nil {
		t.Fatalf("reading cookies: %v", err)
	}
	for _, c := range res.Cookies {
		if c.Name == httpapi.SessionCookie {
			return c
		}
	}
	return nil
}

// hover moves the mouse to the middle of the element css names.
func hover(t *testing.T, ctx context.Context, css string) {
	t.Helper()
	xy := eval[[]float64](t, ctx, `(() => { const e = document.querySelector(`+jsString(css)+`); e.scrollIntoView({ block: 'center' }); const r = e.getBoundingClientRect(); return [r.x + r.width * 0.97, r.y + r.height / 2]; })()`)
	if _, err := chromedp.Call(ctx, input.DispatchMouseEvent, input.DispatchMouseEventParams{Type: input.DispatchMouseEventTypeMouseMoved, X: xy[0], Y: xy[1]}); err != nil {
		t.Fatalf("moving the mouse over %s: %v", css, err)
	}
}

// eval runs a JavaScript expression and returns its value.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}
