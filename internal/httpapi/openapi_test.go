package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"go.yaml.in/yaml/v4"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/alarm"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/schedule"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
)

var update = flag.Bool("update", false, "rewrite api/openapi.json from api/openapi.yaml")

const (
	openapiYAML = "../../api/openapi.yaml"
	openapiJSON = "../../api/openapi.json"
)

func init() {
	// The backup's archive: validated as an opaque string.
	openapi3filter.RegisterBodyDecoder("application/x-tar", openapi3filter.FileBodyDecoder)
}

// TestOpenAPIJSON: the served api/openapi.json is api/openapi.yaml (the
// hand-written source) converted, and a valid OpenAPI 3.1 document.
// With -update it rewrites the JSON.
func TestOpenAPIJSON(t *testing.T) {
	src, err := os.ReadFile(openapiYAML)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := yaml.Unmarshal(src, &v); err != nil {
		t.Fatalf("%s: %v", openapiYAML, err)
	}
	want, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatalf("%s as JSON: %v", openapiYAML, err)
	}
	want = append(want, '\n')
	if *update {
		if err := os.WriteFile(openapiJSON, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := api.OpenAPI(); !bytes.Equal(got, want) {
		t.Fatalf("api/openapi.json is not api/openapi.yaml converted: run go test ./internal/httpapi -run TestOpenAPIJSON -update")
	}
	doc := loadOpenAPI(t)
	if doc.OpenAPI != "3.1.0" {
		t.Errorf("openapi = %q, want 3.1.0", doc.OpenAPI)
	}
}

// loadOpenAPI loads and validates the embedded document.
func loadOpenAPI(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatalf("loading the OpenAPI document: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("the OpenAPI document is not valid: %v", err)
	}
	return doc
}

// registeredRoutes returns every pattern the package's non-test files
// register on the mux (routes.go and the files it calls), but the
// dashboard's: its static files are not the API.
func registeredRoutes(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		src, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range regexp.MustCompile(`m\.Handle(?:Func)?\("([^"]+)"`).FindAllSubmatch(src, -1) {
			p := string(m[1])
			if p == "/ui/" || p == "GET /{$}" || slices.Contains(routes, p) {
				continue
			}
			routes = append(routes, p)
		}
	}
	if len(routes) < 40 {
		t.Fatalf("found only %d routes: %q", len(routes), routes)
	}
	slices.Sort(routes)
	return routes
}

// docOperations returns the document's operations as mux patterns
// ("POST /v1/reserve", "POST /{$}").
func docOperations(doc *openapi3.T) []string {
	var ops []string
	for path, item := range doc.Paths.Map() {
		for method := range item.Operations() {
			p := path
			if p == "/" {
				p = "/{$}"
			}
			ops = append(ops, method+" "+p)
		}
	}
	slices.Sort(ops)
	return ops
}

// TestOpenAPICoversEveryRoute: every route the server registers has its
// path and method in the document, and the document has nothing else.
func TestOpenAPICoversEveryRoute(t *testing.T) {
	routes := registeredRoutes(t)
	ops := docOperations(loadOpenAPI(t))
	for _, r := range routes {
		if !slices.Contains(ops, r) {
			t.Errorf("route %q is not in api/openapi.yaml", r)
		}
	}
	for _, o := range ops {
		if !slices.Contains(routes, o) {
			t.Errorf("api/openapi.yaml has %q, which no route serves", o)
		}
	}
}

// TestOpenAPIErrorCodes: the document's error code enum holds every code
// of codes.go and every code the packages name in a literal
// (delayq.Invalid("bad_cron", ...), Code... = "..."), so an answer with a
// new code fails validation only if no test reaches it.
func TestOpenAPIErrorCodes(t *testing.T) {
	doc := loadOpenAPI(t)
	var enum []string
	for _, v := range doc.Components.Schemas["ErrorCode"].Value.Enum {
		enum = append(enum, v.(string))
	}
	want := map[string]string{}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "../../codes.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		for i, name := range vs.Names {
			if i >= len(vs.Values) {
				break
			}
			if lit, ok := vs.Values[i].(*ast.BasicLit); ok && strings.HasPrefix(name.Name, "Code") && lit.Kind == token.STRING {
				code, _ := strconv.Unquote(lit.Value)
				want[code] = "codes.go " + name.Name
			}
		}
		return true
	})
	if len(want) < 40 {
		t.Fatalf("found only %d codes in codes.go", len(want))
	}
	literal := regexp.MustCompile(`(?:Invalid\(|Code[A-Za-z]* *= *|httpError\{http\.Status[A-Za-z]+, )"([a-z_]+)"`)
	err = filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || d.Name() == "examples" || strings.HasPrefix(d.Name(), ".")) && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range literal.FindAllSubmatch(src, -1) {
			if _, ok := want[string(m[1])]; !ok {
				want[string(m[1])] = path
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for code, where := range want {
		if !slices.Contains(enum, code) {
			t.Errorf("error code %q (%s) is missing from ErrorCode in api/openapi.yaml", code, where)
		}
	}
}

// checker is an http.RoundTripper that validates every request it sends
// and every answer against the OpenAPI document, with kin-openapi's
// openapi3filter (JSON Schema 2020-12 for a 3.1 document). Requests are
// sent to a real server over a real socket; checker only watches.
type checker struct {
	t    *testing.T
	doc  *openapi3.T
	mux  *http.ServeMux // the document's operations, matched as the server matches routes
	next http.RoundTripper

	mu   sync.Mutex
	seen map[string][]int // operation → statuses validated
}

// invalidKey marks a request the test sends invalid on purpose: the
// document must refuse it too, and the answer must still match.
type invalidKey struct{}

func invalid(r *http.Request) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), invalidKey{}, true))
}

func newChecker(t *testing.T, doc *openapi3.T) *checker {
	c := &checker{t: t, doc: doc, mux: http.NewServeMux(), next: http.DefaultTransport, seen: map[string][]int{}}
	for _, op := range docOperations(doc) {
		names := regexp.MustCompile(`\{(\w+)\}`).FindAllStringSubmatch(op, -1)
		c.mux.HandleFunc(op, func(w http.ResponseWriter, r *http.Request) {
			for _, n := range names {
				w.Header().Set("X-Param-"+n[1], r.PathValue(n[1]))
			}
		})
	}
	return c
}

// route finds r's operation in the document, with its path values.
func (c *checker) route(r *http.Request) (*routers.Route, map[string]string, error) {
	_, pattern := c.mux.Handler(r)
	if pattern == "" {
		return nil, nil, fmt.Errorf("%s %s is no operation of the document", r.Method, r.URL.Path)
	}
	rec := httptest.NewRecorder()
	c.mux.ServeHTTP(rec, r)
	params := map[string]string{}
	for k, v := range rec.Header() {
		if name, ok := strings.CutPrefix(k, "X-Param-"); ok {
			params[strings.ToLower(name)] = v[0]
		}
	}
	method, path, _ := strings.Cut(pattern, " ")
	if path == "/{$}" {
		path = "/"
	}
	item := c.doc.Paths.Value(path)
	return &routers.Route{Spec: c.doc, Path: path, PathItem: item, Method: method, Operation: item.GetOperation(method)}, params, nil
}

func (c *checker) RoundTrip(r *http.Request) (*http.Response, error) {
	c.t.Helper()
	var body []byte
	if r.Body != nil {
		var err error
		if body, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body.Close()
	}
	route, params, err := c.route(r)
	if err != nil {
		c.t.Errorf("%v", err)
		return nil, err
	}
	opts := &openapi3filter.Options{
		AuthenticationFunc:                openapi3filter.NoopAuthenticationFunc, // the server checks tokens; tests of 401 and 403 below
		IncludeResponseStatus:             true,
		RejectWhenRequestBodyNotSpecified: true,
		MultiError:                        true,
	}
	vr := r.Clone(r.Context())
	vr.Body = io.NopCloser(bytes.NewReader(body))
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
	name := route.Method + " " + route.Path
	reqErr := openapi3filter.ValidateRequest(r.Context(), in)
	if bad, _ := r.Context().Value(invalidKey{}).(bool); bad {
		if reqErr == nil {
			c.t.Errorf("%s %s (invalid on purpose) passes the document's checks", name, body)
		}
	} else if reqErr != nil {
		c.t.Errorf("request %s %s %s does not match the document: %v", name, r.URL.RawQuery, body, reqErr)
	}

	sent := r.Clone(r.Context())
	sent.Body, sent.ContentLength = http.NoBody, 0
	if len(body) > 0 {
		sent.Body, sent.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	}
	resp, err := c.next.RoundTrip(sent)
	if err != nil {
		return nil, err
	}
	rb, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	resp.Body = io.NopCloser(bytes.NewReader(rb))
	in.Request = sent // the request as the server saw it
	if err := openapi3filter.ValidateResponse(r.Context(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: resp.StatusCode, Header: resp.Header,
		Body: io.NopCloser(bytes.NewReader(rb)), Options: opts,
	}); err != nil {
		c.t.Errorf("answer to %s %s = %d %s does not match the document: %v", name, body, resp.StatusCode, clip(rb), err)
	}
	c.mu.Lock()
	c.seen[name] = append(c.seen[name], resp.StatusCode)
	c.mu.Unlock()
	return resp, nil
}

func clip(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// oapiClient sends requests through the checker with a token (none when
// token is "").
type oapiClient struct {
	t     *testing.T
	base  string
	token string
	hc    *http.Client
}

// call sends one request, checks its status, and decodes the answer
// into out when out is not nil.
func (c *oapiClient) call(want int, method, path, body string, out any, mark ...func(*http.Request) *http.Request) http.Header {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequestWithContext(c.t.Context(), method, c.base+path, rd)
	if err != nil {
		c.t.Fatal(err)
	}
	if body != "" {
		r.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		r.Header.Set("Authorization", "Bearer "+c.token)
	}
	for _, m := range mark {
		r = m(r)
	}
	resp, err := c.hc.Do(r)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s %s = %d %s, want %d", method, path, body, resp.StatusCode, clip(b), want)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %v in %s", method, path, err, clip(b))
		}
	}
	return resp.Header
}

// withHeader sets a header on a request, as a browser would.
func withHeader(k, v string) func(*http.Request) *http.Request {
	return func(r *http.Request) *http.Request { r.Header.Set(k, v); return r }
}

// TestOpenAPI drives a real server (diskstore, schedules, alarms,
// history, tokens) over a real socket through every operation of the
// document, successes and errors, and validates each request and answer
// against it. Then every operation must have been exercised.
func TestOpenAPI(t *testing.T) {
	doc := loadOpenAPI(t)
	// Retention on, as the server's --retain default is, so finished and
	// deleted jobs are answered (state, ended_at, history) and checked too.
	st, err := diskstore.Open(t.TempDir(), diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20,
		Retention: store.Retention{For: time.Hour, Bodies: true}})
	if err != nil {
		t.Fatal(err)
	}
	hist := history.New(history.Config{Topics: st.Topics, Store: st, Logger: discard()})
	e := engine.New(st, engine.Config{Logger: discard(), Fired: hist.Fired})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	sched := schedule.New(store.Schedules(st), e, schedule.Config{Logger: discard()})
	alarms := alarm.New(st, alarm.Sources{Topics: e.Topics, LatenessP99: hist.LatenessP99}, alarm.Config{Logger: discard(), AllowNets: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}})
	t.Cleanup(alarms.Close)
	tokens, err := auth.Load("", `{"tokens":[
		{"name":"ops","sha256":"`+auth.HashToken("ops-token")+`","scopes":["admin"]},
		{"name":"viewer","sha256":"`+auth.HashToken("viewer-token")+`","scopes":["read"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	sessions := auth.NewSessions(tokens)
	h := NewHandler(e, Options{Logger: discard(), Schedules: sched, Alarms: alarms, History: hist, Sessions: sessions})
	srv := httptest.NewServer(Guard(e, h, GuardOptions{Auth: tokens, Sessions: sessions, Logger: discard()}))
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		if err := st.Close(); err != nil {
			t.Error(err)
		}
	})
	chk := newChecker(t, doc)
	hc := &http.Client{Transport: chk, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	ops := &oapiClient{t: t, base: srv.URL, token: "ops-token", hc: hc}
	viewer := &oapiClient{t: t, base: srv.URL, token: "viewer-token", hc: hc}
	nobody := &oapiClient{t: t, base: srv.URL, hc: hc}

	// Open routes; the served document is the embedded one.
	var served map[string]any
	nobody.call(200, "GET", "/v1/openapi.json", "", &served)
	if served["openapi"] != "3.1.0" {
		t.Errorf("GET /v1/openapi.json: openapi = %v", served["openapi"])
	}
	nobody.call(200, "GET", "/healthz", "", nil)
	nobody.call(200, "GET", "/readyz", "", nil)
	ops.call(200, "GET", "/metrics", "", nil)

	// Tokens: none, and one without the scope.
	nobody.call(401, "GET", "/v1/topics", "", nil)
	nobody.call(401, "GET", "/metrics", "", nil)
	viewer.call(403, "PUT", "/v1/topics/t/policy", `{"ttr":"1m"}`, nil)

	// The dashboard's login: a session cookie stands for the token.
	nobody.call(401, "POST", "/v1/session", `{"token":"wrong"}`, nil)
	nobody.call(400, "POST", "/v1/session", `{"tok":"ops-token"}`, nil, invalid)
	nobody.call(403, "POST", "/v1/session", `{"token":"ops-token"}`, nil, withHeader("Sec-Fetch-Site", "cross-site"))
	hdr := nobody.call(200, "POST", "/v1/session", `{"token":"ops-token"}`, nil, withHeader("Sec-Fetch-Site", "same-origin"))
	cookie := withHeader("Cookie", strings.Split(hdr.Get("Set-Cookie"), ";")[0])
	ops.call(200, "GET", "/v1/session", "", nil)
	nobody.call(200, "GET", "/v1/session", "", nil, cookie)
	nobody.call(403, "POST", "/v1/topics/t/jobs", `{"body":"x"}`, nil, cookie) // says nothing of its origin
	nobody.call(204, "DELETE", "/v1/session", "", nil, cookie)
	nobody.call(401, "GET", "/v1/session", "", nil, cookie)

	// Puts: one, with each body kind and due form, a batch, a duplicate.
	const tp = "/v1/topics/shop%2Forders"
	ops.call(201, "POST", tp+"/jobs", `{"id":"d1","body":"later","delay":"1h","ttr":30,"priority":7,"max_attempts":3}`, nil)
	ops.call(201, "POST", tp+"/jobs", `{"id":"r1","body_base64":"/w=="}`, nil)
	ops.call(201, "POST", tp+"/jobs", `{"id":"r2","body":"now","at":"2001-01-01T00:00:00Z"}`, nil)
	ops.call(409, "POST", tp+"/jobs", `{"id":"r2","body":"again"}`, nil)
	ops.call(400, "POST", tp+"/jobs", `{"nope":1}`, nil, invalid)
	ops.call(400, "POST", tp+"/jobs", `{"Body":"x"}`, nil, invalid)   // names are case-sensitive
	ops.call(400, "POST", tp+"/jobs", `{"body":"x","body":"y"}`, nil) // duplicate_field
	ops.call(400, "POST", "/v1/topics/-bad/jobs", `{"body":"x"}`, nil)
	ops.call(201, "POST", tp+"/jobs/batch", `{"jobs":[{"id":"b1","body":"x"},{"id":"b2","body":"y","delay":0.01},{"id":"b3","body":"z"}]}`, nil)
	ops.call(400, "POST", tp+"/jobs/batch", `{"jobs":[{"body":"x","delay":"soon"}]}`, nil)
	ops.call(413, "POST", "/v1/reserve", `{"topics":["`+strings.Repeat("a", smallRequest)+`"]}`, nil)

	// Reading topics and jobs, a page at a time.
	ops.call(200, "GET", "/v1/topics", "", nil)
	ops.call(200, "GET", tp, "", nil)
	var page api.JobsResponse
	ops.call(200, "GET", tp+"/jobs?state=ready&limit=1", "", &page)
	if page.Next == "" {
		t.Fatalf("a page of 1 of 4 ready jobs has no next cursor")
	}
	ops.call(200, "GET", tp+"/jobs?state=ready&limit=1&cursor="+page.Next, "", nil)
	ops.call(400, "GET", tp+"/jobs?state=lost", "", nil, invalid)
	ops.call(400, "GET", tp+"/jobs?state=ready&cursor=nonsense", "", nil)
	ops.call(200, "GET", "/v1/jobs/d1", "", nil)
	ops.call(404, "GET", "/v1/jobs/nosuch", "", nil)

	// A consumer's life: reserve, touch, release, bury, finish, batch
	// finish, a stale reservation.
	var res api.JobsResponse
	ops.call(200, "POST", "/v1/reserve", `{"topics":["shop/orders"],"n":4,"wait":"1s"}`, &res)
	if len(res.Jobs) != 4 {
		t.Fatalf("reserved %d jobs, want 4: %+v", len(res.Jobs), res.Jobs)
	}
	rsv := func(i int) string { return res.Jobs[i].Reservation }
	ops.call(200, "POST", "/v1/jobs/"+res.Jobs[0].ID+"/touch", `{"reservation":"`+rsv(0)+`"}`, nil)
	ops.call(200, "POST", "/v1/jobs/"+res.Jobs[0].ID+"/release", `{"reservation":"`+rsv(0)+`","delay":"1h","priority":1,"reason":"later"}`, nil)
	ops.call(409, "POST", "/v1/jobs/"+res.Jobs[0].ID+"/finish", `{"reservation":"`+rsv(0)+`"}`, nil)
	ops.call(200, "POST", "/v1/jobs/"+res.Jobs[1].ID+"/bury", `{"reservation":"`+rsv(1)+`","reason":"card declined"}`, nil)
	ops.call(200, "POST", "/v1/jobs/"+res.Jobs[2].ID+"/finish", `{"reservation":"`+rsv(2)+`"}`, nil)
	ops.call(200, "POST", "/v1/jobs/finish", `{"jobs":[{"id":"`+res.Jobs[3].ID+`","reservation":"`+rsv(3)+`"},{"id":"nosuch","reservation":"x"}]}`, nil)
	ops.call(400, "POST", "/v1/jobs/finish", `{"jobs":{}}`, nil, invalid)
	ops.call(400, "POST", "/v1/reserve", `{"topics":["t"],"n":5000}`, nil, invalid)
	// A finished job is retained: read with its end and attempts, listed
	// by its state, and its id still taken (409 exists with the state).
	var ended api.Job
	ops.call(200, "GET", "/v1/jobs/"+res.Jobs[2].ID, "", &ended)
	if ended.State != "finished" || ended.EndedAt == nil || len(ended.History) != 1 || ended.History[0].Outcome != "finished" {
		t.Errorf("retained finished job = %+v, want state finished, ended_at and its one attempt", ended)
	}
	var finished api.JobsResponse
	ops.call(200, "GET", tp+"/jobs?state=finished", "", &finished)
	if len(finished.Jobs) != 2 {
		t.Errorf("finished jobs = %+v, want the two finished above", finished.Jobs)
	}
	var exists struct {
		Error struct{ Code, State string }
	}
	ops.call(409, "POST", tp+"/jobs", `{"id":"`+res.Jobs[2].ID+`","body":"again"}`, &exists)
	if exists.Error.Code != "exists" || exists.Error.State != "finished" {
		t.Errorf("put of a finished job's id = %+v, want exists, state finished", exists)
	}
	ops.call(200, "POST", "/v1/reserve", `{"topics":["empty"]}`, nil) // nothing ready: an empty list

	// An operator's changes.
	ops.call(200, "PATCH", "/v1/jobs/d1", `{"delay":"2h","priority":5,"body":"changed"}`, nil)
	ops.call(200, "POST", "/v1/jobs/d1/kick", "", nil)
	ops.call(409, "POST", "/v1/jobs/d1/kick", "", nil) // ready now: nothing to kick
	ops.call(200, "DELETE", "/v1/jobs/d1", "", nil)
	ops.call(404, "DELETE", "/v1/jobs/d1", "", nil)
	var deleted api.Job
	ops.call(200, "GET", "/v1/jobs/d1", "", &deleted)
	if deleted.State != "deleted" || deleted.EndedAt == nil {
		t.Errorf("retained deleted job = %+v, want state deleted and ended_at", deleted)
	}
	ops.call(200, "GET", tp+"/jobs?state=deleted", "", nil)
	ops.call(404, "PATCH", "/v1/jobs/d1", `{"priority":1}`, nil)
	viewer.call(403, "DELETE", "/v1/jobs/r1", "", nil)
	ops.call(200, "POST", tp+"/kick", `{"n":10}`, nil)
	ops.call(200, "POST", tp+"/kick", `{"n":10,"state":"delayed"}`, nil)
	ops.call(400, "POST", tp+"/kick", `{"n":"all"}`, nil, invalid)
	ops.call(400, "POST", tp+"/kick", `{"n":1,"state":"ready"}`, nil, invalid)
	ops.call(200, "POST", tp+"/pause", `{"for":"1m"}`, nil)
	ops.call(200, "POST", tp+"/resume", "", nil)
	ops.call(200, "POST", tp+"/pause", "", nil)
	ops.call(400, "POST", tp+"/pause", `{"for":"-1s"}`, nil)
	ops.call(200, "POST", tp+"/resume", "", nil)
	ops.call(200, "DELETE", tp+"/jobs?state=delayed", "", nil)
	ops.call(400, "DELETE", tp+"/jobs", "", nil, invalid)

	// Topic policies.
	ops.call(201, "PUT", tp+"/policy", `{"ttr":"45s","max_attempts":3,"max_jobs":100,"backoff":{"initial":"1s","factor":3}}`, nil)
	ops.call(200, "PUT", tp+"/policy", `{"ttr":90}`, nil)
	ops.call(400, "PUT", tp+"/policy", `{}`, nil)
	ops.call(200, "GET", tp+"/policy", "", nil)
	ops.call(200, "GET", "/v1/policies", "", nil)
	ops.call(204, "DELETE", tp+"/policy", "", nil)
	ops.call(404, "GET", tp+"/policy", "", nil)
	ops.call(404, "DELETE", tp+"/policy", "", nil)

	// The dashboard's charts: a fire by the timer, then a sample.
	ops.call(201, "POST", "/v1/topics/charts/jobs", `{"body":"x","delay":"10ms"}`, nil)
	for deadline := time.Now().Add(10 * time.Second); ; {
		var top api.Topic
		ops.call(200, "GET", "/v1/topics/charts", "", &top)
		if top.Ready == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the delayed job did not become ready")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := hist.Sample(ctx); err != nil {
		t.Fatal(err)
	}
	var th api.TopicHistory
	ops.call(200, "GET", "/v1/topics/charts/history", "", &th)
	if len(th.Samples) != 1 || th.Samples[0].Lateness == nil {
		t.Errorf("history = %+v, want one sample with a fire's lateness", th)
	}
	var week api.TopicHistory
	ops.call(200, "GET", "/v1/topics/charts/history?range=7d", "", &week)
	if week.Interval != 60 || week.Span != 7*86400 || len(week.Samples) != 1 || len(week.Resolutions) != 2 {
		t.Errorf("history of a week = %+v, want one-minute buckets, the one sample and both resolutions", week)
	}
	ops.call(400, "GET", "/v1/topics/charts/history?range=8d", "", nil)
	ops.call(200, "GET", tp+"/due", "", nil)
	ops.call(200, "GET", tp+"/due?within=1m,1h,7d", "", nil)
	ops.call(400, "GET", tp+"/due?within=soon", "", nil)

	// Schedules.
	ops.call(201, "PUT", "/v1/schedules/nightly", `{"topic":"reports","cron":"0 3 * * *","body":"r","timezone":"Europe/Berlin","missed":"one"}`, nil)
	ops.call(200, "PUT", "/v1/schedules/nightly", `{"topic":"reports","every":"1h","body_base64":"/w==","ttr":"2m","priority":3,"max_attempts":2}`, nil)
	ops.call(400, "PUT", "/v1/schedules/broken", `{"topic":"reports","cron":"every day"}`, nil)
	ops.call(200, "GET", "/v1/schedules/nightly", "", nil)
	ops.call(200, "GET", "/v1/schedules", "", nil)
	ops.call(200, "POST", "/v1/schedules/nightly/pause", "", nil)
	ops.call(200, "POST", "/v1/schedules/nightly/resume", "", nil)
	ops.call(204, "DELETE", "/v1/schedules/nightly", "", nil)
	ops.call(404, "GET", "/v1/schedules/nightly", "", nil)
	ops.call(404, "POST", "/v1/schedules/nightly/pause", "", nil)
	ops.call(404, "DELETE", "/v1/schedules/nightly", "", nil)

	// Alarms: one that fires at once, evaluated, so its answer carries
	// its conditions' state.
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	ops.call(201, "PUT", "/v1/alarms/buried", `{"url":"`+hook.URL+`","topics":["shop/*"],"when":{"buried_over":0,"oldest_ready_over":"1h","lateness_p99_over":"5s","failures_per_min_over":10},"repeat":"10m"}`, nil)
	ops.call(200, "PUT", "/v1/alarms/buried", `{"url":"`+hook.URL+`","topics":["shop/*"],"when":{"oldest_ready_over":"1ms"},"secret":"s3cret","headers":{"X-Api-Key":"k"},"format":"alertmanager"}`, nil)
	ops.call(400, "PUT", "/v1/alarms/broken", `{"url":"`+hook.URL+`","when":{"buried_over":1},"format":"pager"}`, nil, invalid)
	ops.call(400, "PUT", "/v1/alarms/broken", `{"url":"`+hook.URL+`","when":{"buried_over":1},"headers":{"Host":"x"}}`, nil)
	ops.call(400, "PUT", "/v1/alarms/broken", `{"url":"`+hook.URL+`","when":{}}`, nil)
	if err := alarms.Evaluate(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	var al api.Alarm
	ops.call(200, "GET", "/v1/alarms/buried", "", &al)
	if al.State != "firing" || len(al.Conditions) == 0 || al.Conditions[0].Since == nil || al.Secret != api.SecretMask || al.Format != "alertmanager" {
		t.Errorf("alarm after an evaluation = %+v, want firing with its condition", al)
	}
	ops.call(200, "GET", "/v1/alarms", "", nil)
	ops.call(204, "DELETE", "/v1/alarms/buried", "", nil)
	ops.call(404, "GET", "/v1/alarms/buried", "", nil)
	ops.call(404, "DELETE", "/v1/alarms/buried", "", nil)

	// Operations.
	ops.call(200, "GET", "/v1/cluster", "", nil)
	ops.call(200, "GET", "/v1/backup", "", nil)
	ops.call(403, "GET", "/v1/backup", "", nil, withHeader("Sec-Fetch-Site", "cross-site")) // cross_site
	viewer.call(403, "GET", "/v1/backup", "", nil)

	// The original protocol, on both paths.
	ops.call(200, "POST", "/", `{"command":"add","topic":"legacy","id":"c1","body":{"a":1},"delay":0,"TTR":30}`, nil)
	ops.call(200, "POST", "/v1/command", `{"command":"pop","topic":"legacy","timeout":0}`, nil)
	ops.call(200, "POST", "/v1/command", `{"command":"delete","id":"c1"}`, nil)
	ops.call(200, "POST", "/", `{"command":"explode"}`, nil)
	ops.call(400, "POST", "/", `not json`, nil, invalid)

	// Every operation was exercised, and answered at least once with
	// success.
	for _, op := range docOperations(doc) {
		method, path, _ := strings.Cut(op, " ")
		if path == "/{$}" {
			path = "/"
		}
		statuses := chk.seen[method+" "+path]
		if !slices.ContainsFunc(statuses, func(s int) bool { return s < 300 }) {
			t.Errorf("%s was not exercised with a success (statuses seen: %v)", op, statuses)
		}
	}
}
