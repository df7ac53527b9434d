package dashboard_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/alarm"
	"github.com/delayq/delayq/internal/dashboard"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/schedule"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// newAPI is the real HTTP API with the dashboard mounted, over a running
// engine on memstore, as the server wires it (ended jobs retained for an
// hour, as --retain's default).
func newAPI(t *testing.T) http.Handler { return newAPIs(t).h }

// apis is newAPI's handler with the parts tests drive directly.
type apis struct {
	h      http.Handler
	e      *engine.Engine
	alarms *alarm.Service
}

func newAPIs(t *testing.T) apis { return newAPIsWith(t, nil) }

// newAPIsWith is newAPIs with its handler's options changed by edit
// (when not nil) before the handler is built.
func newAPIsWith(t *testing.T, edit func(*httpapi.Options)) apis {
	t.Helper()
	st := memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour, Bodies: true}})
	log := slog.New(slog.DiscardHandler)
	var e *engine.Engine
	counts := func() map[string]history.Counts { return history.MetricsCounts(e.Metrics()) }
	hist := history.New(history.Config{Topics: st.Topics, Store: st, Counts: counts, Logger: log, Interval: sampleInterval, Span: time.Minute})
	e = engine.New(st, engine.Config{Logger: log, Fired: hist.Fired})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { defer func() { done <- struct{}{} }(); _ = e.Run(ctx) }()
	go func() { defer func() { done <- struct{}{} }(); _ = hist.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-done
		<-done
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	sched := schedule.New(store.Schedules(st), e, schedule.Config{Logger: log})
	sctx, stop := context.WithCancel(context.Background())
	sdone := make(chan struct{})
	go func() { defer close(sdone); _ = sched.Run(sctx) }()
	t.Cleanup(func() { stop(); <-sdone })
	// Alarms are evaluated by the tests (Evaluate), not by a loop.
	alarms := alarm.New(st, alarm.Sources{Topics: e.Topics, LatenessP99: hist.LatenessP99}, alarm.Config{Logger: log, AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(alarms.Close)
	opts := httpapi.Options{UI: dashboard.Handler(), Logger: log, Schedules: sched, History: hist, Alarms: alarms}
	if edit != nil {
		edit(&opts)
	}
	return apis{
		h: httpapi.NewHandler(e, opts),
		e: e, alarms: alarms,
	}
}

type response struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, h http.Handler, method, path, body string) response {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, rd))
	return response{w.Code, w.Header(), w.Body.String()}
}

func TestServesFiles(t *testing.T) {
	t.Parallel()
	h := newAPI(t)
	tests := []struct {
		name, method, path string
		status             int
		contentType        string
		contains           string
	}{
		{"index", "GET", "/ui/", 200, "text/html; charset=utf-8", `<script src="app.js" defer>`},
		{"script", "GET", "/ui/app.js", 200, "text/javascript; charset=utf-8", "'GET /v1/topics'"},
		{"stylesheet", "GET", "/ui/style.css", 200, "text/css; charset=utf-8", "#error"},
		{"icon", "GET", "/ui/favicon.svg", 200, "image/svg+xml", "<svg"},
		{"head", "HEAD", "/ui/", 200, "text/html; charset=utf-8", ""},
		{"unknown asset", "GET", "/ui/nope.js", 404, "text/plain; charset=utf-8", "not found"},
		{"unknown dir", "GET", "/ui/static/app.js", 404, "text/plain; charset=utf-8", "not found"},
		{"write method", "POST", "/ui/", 405, "text/plain; charset=utf-8", "read-only"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := do(t, h, tt.method, tt.path, "")
			if r.status != tt.status {
				t.Fatalf("%s %s = %d, want %d; body %q", tt.method, tt.path, r.status, tt.status, r.body)
			}
			if got := r.header.Get("Content-Type"); got != tt.contentType {
				t.Errorf("%s %s Content-Type = %q, want %q", tt.method, tt.path, got, tt.contentType)
			}
			if !strings.Contains(r.body, tt.contains) {
				t.Errorf("%s %s body does not contain %q:\n%.300s", tt.method, tt.path, tt.contains, r.body)
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	t.Parallel()
	r := do(t, newAPI(t), "GET", "/ui/", "")
	for _, name := range []string{"Content-Security-Policy", "X-Content-Type-Options", "Cache-Control"} {
		if r.header.Get(name) == "" {
			t.Errorf("GET /ui/ has no %s header", name)
		}
	}
	if csp := r.header.Get("Content-Security-Policy"); strings.Contains(csp, "unsafe-inline") {
		t.Errorf("Content-Security-Policy %q allows inline code", csp)
	}
}

func TestRedirects(t *testing.T) {
	t.Parallel()
	h := newAPI(t)
	for _, path := range []string{"/", "/ui"} {
		r := do(t, h, "GET", path, "")
		if r.status/100 != 3 || r.header.Get("Location") != "/ui/" {
			t.Errorf("GET %s = %d to %q, want a redirect to /ui/", path, r.status, r.header.Get("Location"))
		}
	}
}

// TestIndexAssetsResolve follows every relative src and href of index.html.
func TestIndexAssetsResolve(t *testing.T) {
	t.Parallel()
	h := newAPI(t)
	index := do(t, h, "GET", "/ui/", "").body
	refs := regexp.MustCompile(`(?:src|href)="([^"#:]+)"`).FindAllStringSubmatch(index, -1)
	if len(refs) < 3 {
		t.Fatalf("index.html references %d assets, want at least the script, the stylesheet and the icon", len(refs))
	}
	for _, m := range refs {
		if r := do(t, h, "GET", "/ui/"+m[1], ""); r.status != http.StatusOK {
			t.Errorf("index.html references %s: GET /ui/%s = %d", m[1], m[1], r.status)
		}
	}
}

// endpointRE matches the entries of app.js's API table: 'METHOD /v1/...'.
var endpointRE = regexp.MustCompile(`'(GET|POST|PATCH|DELETE|PUT) (/v1/[^']*)'`)

// TestScriptCallsOnlyRealEndpoints sends every endpoint the script names,
// with its method, to the real handler: none may be an unknown route or a
// wrong method. Every "/v1/" in the script must be in that table.
func TestScriptCallsOnlyRealEndpoints(t *testing.T) {
	t.Parallel()
	h := newAPI(t)
	js := do(t, h, "GET", "/ui/app.js", "").body
	found := endpointRE.FindAllStringSubmatch(js, -1)
	if len(found) == 0 {
		t.Fatal("app.js names no /v1 endpoint")
	}
	if n := strings.Count(js, "/v1/"); n != len(found) {
		t.Errorf("app.js has %d \"/v1/\" strings but %d entries in its API table: keep every endpoint in the table", n, len(found))
	}
	fill := strings.NewReplacer("{topic}", "shop%2Forders", "{id}", "job-1", "{name}", "nightly")
	for _, m := range found {
		method, path := m[1], fill.Replace(m[2])
		t.Run(method+" "+m[2], func(t *testing.T) {
			if strings.ContainsAny(path, "{}") {
				t.Fatalf("%s has a placeholder this test does not know", m[2])
			}
			r := do(t, h, method, path, "{}")
			var e api.ErrorResponse
			_ = json.Unmarshal([]byte(r.body), &e)
			if r.status == http.StatusMethodNotAllowed ||
				(r.status == http.StatusNotFound && strings.HasPrefix(e.Error.Message, "no such endpoint")) {
				t.Errorf("%s %s = %d %q: the API has no such route", method, path, r.status, e.Error.Message)
			}
		})
	}
}

// TestScriptListsTheAPITable pins the endpoints the dashboard needs, so a
// table entry cannot vanish unnoticed.
func TestScriptListsTheAPITable(t *testing.T) {
	t.Parallel()
	js := do(t, newAPI(t), "GET", "/ui/app.js", "").body
	var got []string
	for _, m := range endpointRE.FindAllStringSubmatch(js, -1) {
		got = append(got, m[1]+" "+m[2])
	}
	want := []string{
		"GET /v1/topics",
		"GET /v1/topics/{topic}",
		"GET /v1/topics/{topic}/jobs",
		"POST /v1/topics/{topic}/kick",
		"POST /v1/topics/{topic}/pause",
		"POST /v1/topics/{topic}/resume",
		"DELETE /v1/topics/{topic}/jobs",
		"GET /v1/topics/{topic}/policy",
		"PUT /v1/topics/{topic}/policy",
		"DELETE /v1/topics/{topic}/policy",
		"GET /v1/topics/{topic}/history",
		"GET /v1/topics/{topic}/due",
		"GET /v1/jobs/{id}",
		"DELETE /v1/jobs/{id}",
		"POST /v1/jobs/{id}/kick",
		"PATCH /v1/jobs/{id}",
		"GET /v1/schedules",
		"PUT /v1/schedules/{name}",
		"POST /v1/schedules/{name}/pause",
		"POST /v1/schedules/{name}/resume",
		"DELETE /v1/schedules/{name}",
		"GET /v1/alarms",
		"PUT /v1/alarms/{name}",
		"DELETE /v1/alarms/{name}",
		"GET /v1/cluster",
		"GET /v1/session",
		"POST /v1/session",
		"DELETE /v1/session",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("app.js API table (-want +got):\n%s", diff)
	}
}

// TestScriptNeverWritesHTML keeps data out of the HTML parser: the script
// builds the DOM with createElement and text nodes only.
func TestScriptNeverWritesHTML(t *testing.T) {
	t.Parallel()
	js := do(t, newAPI(t), "GET", "/ui/app.js", "").body
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval("} {
		if strings.Contains(js, bad) {
			t.Errorf("app.js uses %s", bad)
		}
	}
}

// TestScriptsNeverPrompt: the dashboard asks for nothing in the
// browser's own dialogs (a token went through window.prompt once) and
// keeps no token in script-readable storage.
func TestScriptsNeverPrompt(t *testing.T) {
	t.Parallel()
	h := newAPI(t)
	for _, file := range []string{"app.js", "charts.js"} {
		js := do(t, h, "GET", "/ui/"+file, "").body
		for _, bad := range []string{"prompt(", "sessionStorage", "localStorage", "Authorization"} {
			if strings.Contains(js, bad) {
				t.Errorf("%s uses %s", file, bad)
			}
		}
	}
}
