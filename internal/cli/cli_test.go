package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/buildinfo"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/server"
)

func TestMain(m *testing.M) {
	// Run as the delayq command: TestDocExamples puts this binary on PATH
	// under that name, so the examples' delayq lines need no build.
	if os.Getenv(asDelayq) == "1" {
		os.Exit(Main(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	goleak.VerifyTestMain(m,
		// The client subcommands use http.DefaultClient, whose idle
		// keep-alive connections outlive a test by design.
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
	)
}

// startServer runs a real in-process server on a free port and returns its
// URL for --server.
func startServer(t *testing.T, opts ...func(*config.Config)) string {
	t.Helper()
	cfg := config.Default()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.BeanstalkAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	for _, o := range opts {
		o(&cfg)
	}
	s := server.New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown() = %v", err)
		}
	})
	return s.URL()
}

// run runs the command line and returns its exit code and outputs.
func run(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = Main(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// mustRun runs the command line and fails the test unless it exits 0.
func mustRun(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errOut := run(t, args...)
	if code != 0 {
		t.Fatalf("delayq %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut)
	}
	return out
}

// fields parses "name  value" lines (printJob, stats) into a map.
func fields(out string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		k, v, _ := strings.Cut(line, " ")
		m[k] = strings.TrimSpace(v)
	}
	return m
}

func TestJobLifecycle(t *testing.T) {
	t.Parallel()
	// --retain 0: a finished job is gone at once (TestRetainedJobCommands
	// has the default).
	srv := "--server=" + startServer(t, func(c *config.Config) { c.Retain = 0 })

	out := mustRun(t, "put", srv, "orderclose", "close order 42", "--id", "order-42", "--ttr", "90s", "--priority", "7", "--max-attempts", "3")
	if want := "put job order-42 (seq 1) into topic orderclose\n"; out != want {
		t.Errorf("put printed %q, want %q", out, want)
	}

	got := fields(mustRun(t, "get", srv, "order-42"))
	for k, want := range map[string]string{
		"id": "order-42", "seq": "1", "topic": "orderclose", "state": "ready", "priority": "7",
		"ttr": "1m30s", "attempts": "0 of 3", "body": `"close order 42"`,
	} {
		if got[k] != want {
			t.Errorf("get: %s = %q, want %q", k, got[k], want)
		}
	}

	got = fields(mustRun(t, "reserve", srv, "orderclose", "--wait", "1s"))
	if got["state"] != "reserved" || got["attempts"] != "1 of 3" || got["reservation"] == "" {
		t.Fatalf("reserve printed %v, want a reserved job, attempt 1 of 3, with a reservation", got)
	}
	if !strings.Contains(got["deadline"], "(in 1m") {
		t.Errorf("reserve: deadline = %q, want about 90s ahead", got["deadline"])
	}

	code, _, errOut := run(t, "finish", srv, "order-42", "--reservation", "stale")
	if code != exitError || !strings.Contains(errOut, "not reserved") {
		t.Errorf("finish with a stale reservation: exit %d, stderr %q; want 1 and not reserved", code, errOut)
	}
	out = mustRun(t, "finish", srv, "order-42", "--reservation", got["reservation"])
	if want := "finished job order-42\n"; out != want {
		t.Errorf("finish printed %q, want %q", out, want)
	}
	code, _, errOut = run(t, "get", srv, "order-42")
	if code != exitError || !strings.Contains(errOut, "not found") {
		t.Errorf("get of a finished job: exit %d, stderr %q; want 1 and not found", code, errOut)
	}
	if out := mustRun(t, "reserve", srv, "orderclose"); out != "no job ready\n" {
		t.Errorf("reserve of an empty topic printed %q, want %q", out, "no job ready\n")
	}
}

// TestFinishSeveralAndDays finishes two reserved jobs and a stale one in
// one command, and puts with a delay in days.
func TestFinishSeveralAndDays(t *testing.T) {
	t.Parallel()
	srv := "--server=" + startServer(t)
	mustRun(t, "put", srv, "t", "a", "--id", "a:1")
	mustRun(t, "put", srv, "t", "b", "--id", "b")
	mustRun(t, "put", srv, "later", "c", "--id", "c", "--delay", "7d")
	if got := fields(mustRun(t, "get", srv, "c")); !strings.Contains(got["due"], "(in 167h59m") {
		t.Errorf("get of a job put with --delay 7d: due %q, want in about 168h", got["due"])
	}
	var res api.JobsResponse
	if err := json.Unmarshal([]byte(mustRun(t, "reserve", srv, "t", "--n", "2", "--json")), &res); err != nil || len(res.Jobs) != 2 {
		t.Fatalf("reserve --json = %+v, %v", res, err)
	}
	var pairs []string
	for _, j := range res.Jobs {
		pairs = append(pairs, j.ID+":"+j.Reservation)
	}
	code, out, errOut := run(t, append([]string{"finish", srv, "c:0-0"}, pairs...)...)
	if code != exitError || !strings.Contains(out, "finished job a:1\n") || !strings.Contains(out, "finished job b\n") ||
		!strings.Contains(errOut, `job "c" is not reserved by you`) {
		t.Errorf("finish of two held jobs and a stale one: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	// The batch finish keeps both as finished (--retain's default).
	for _, id := range []string{"a:1", "b"} {
		if got := fields(mustRun(t, "get", srv, id)); got["state"] != "finished" {
			t.Errorf("get %s after finish: state %q, want finished", id, got["state"])
		}
	}
}

// TestMessagesForPeople: the CLI reports a missing job and a down server
// in plain words, not in the layers the error passed through.
func TestMessagesForPeople(t *testing.T) {
	t.Parallel()
	srv := "--server=" + startServer(t)
	if _, _, errOut := run(t, "get", srv, "nosuch"); errOut != "delayq get: job \"nosuch\" not found\n" {
		t.Errorf("get nosuch: stderr %q", errOut)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	down := ln.Addr().String()
	ln.Close()
	want := "delayq get: cannot reach delayq at " + down + ": connection refused\n"
	if _, _, errOut := run(t, "get", "--server="+down, "x"); errOut != want {
		t.Errorf("get from a down server: stderr %q, want %q", errOut, want)
	}
}

func TestPutWithDelayKickAndDelete(t *testing.T) {
	t.Parallel()
	srv := "--server=" + startServer(t)
	mustRun(t, "put", srv, "refund", "a", "--id", "r1", "--delay", "1h")
	mustRun(t, "put", srv, "refund", "b", "--id", "r2", "--at", time.Now().Add(2*time.Hour).Format(time.RFC3339))
	mustRun(t, "put", srv, "rate", "c", "--id", "x1")

	if got := fields(mustRun(t, "get", srv, "r1")); got["state"] != "delayed" || !strings.Contains(got["due"], "(in 59m") {
		t.Errorf("get of a job put with --delay 1h = state %q due %q, want delayed, due in about 1h", got["state"], got["due"])
	}
	// A kick retries buried jobs only: the job due in an hour stays.
	if out := mustRun(t, "kick", srv, "refund", "-n", "5"); out != "kicked 0 buried jobs in topic refund\n" {
		t.Errorf("kick with none buried printed %q", out)
	}
	if got := fields(mustRun(t, "get", srv, "r1")); got["state"] != "delayed" {
		t.Errorf("job r1 after a kick of buried jobs is %s, want delayed", got["state"])
	}
	if out := mustRun(t, "kick", srv, "refund", "--delayed", "--n", "1"); out != "fired 1 delayed job early\n" {
		t.Errorf("kick --delayed printed %q", out)
	}
	if out := mustRun(t, "kick", srv, "--id", "r2"); out != "kicked job r2\n" {
		t.Errorf("kick --id printed %q", out)
	}
	if out := mustRun(t, "delete", srv, "x1"); out != "deleted job x1\n" {
		t.Errorf("delete printed %q", out)
	}

	var topics api.TopicsResponse
	if err := json.Unmarshal([]byte(mustRun(t, "topics", srv, "--json")), &topics); err != nil {
		t.Fatalf("topics --json: %v", err)
	}
	want := []api.Topic{{Name: "refund", Ready: 2}}
	opt := cmpIgnoreAge()
	if diff := cmp.Diff(want, topics.Topics, opt); diff != "" {
		t.Errorf("topics after kicks and delete (-want +got):\n%s", diff)
	}

	table := mustRun(t, "topics", srv)
	if !regexp.MustCompile(`(?m)^\s*refund\s+0\s+2\s+0\s+0\s+no\s+\S+\s*$`).MatchString(table) {
		t.Errorf("topics printed\n%s\nwant a row: refund 0 delayed, 2 ready, 0 reserved, 0 buried, not paused", table)
	}
}

func cmpIgnoreAge() cmp.Option {
	return cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".OldestReadyAge" }, cmp.Ignore())
}

func TestStats(t *testing.T) {
	t.Parallel()
	url := startServer(t)
	srv := "--server=" + url
	mustRun(t, "put", srv, "a", "1")
	mustRun(t, "put", srv, "a", "2", "--delay", "1h")
	mustRun(t, "put", srv, "b", "3")
	mustRun(t, "reserve", srv, "b")

	got := fields(mustRun(t, "stats", srv))
	want := map[string]string{"server": url, "health": "healthy", "topics": "2", "delayed": "1",
		"ready": "1", "reserved": "1", "buried": "0", "total": "3"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	var s stats
	if err := json.Unmarshal([]byte(mustRun(t, "stats", srv, "--json")), &s); err != nil {
		t.Fatalf("stats --json: %v", err)
	}
	wantJSON := stats{Server: url, Healthy: true, Topics: 2, Delayed: 1, Ready: 1, Reserved: 1}
	if diff := cmp.Diff(wantJSON, s); diff != "" {
		t.Errorf("stats --json (-want +got):\n%s", diff)
	}
}

func TestStatsOfADeadServer(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "stats", "--server=http://127.0.0.1:1")
	if code != exitError || !strings.Contains(out, "unhealthy") || !strings.Contains(errOut, "unhealthy") {
		t.Errorf("stats of a dead server: exit %d, stdout %q, stderr %q; want 1 and unhealthy", code, out, errOut)
	}
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{"no command", nil, exitUsage, "expected one of"},
		{"unknown command", []string{"frobnicate"}, exitUsage, "unexpected argument"},
		{"put without body", []string{"put", "t"}, exitUsage, "expected \"<body>\""},
		{"delay and at", []string{"put", "t", "b", "--delay", "1s", "--at", "2030-01-01T00:00:00Z"}, exitUsage, "can't be used together"},
		{"finish without reservation", []string{"finish", "x"}, exitUsage, "--reservation"},
		{"kick with topic and id", []string{"kick", "t", "--id", "x"}, exitUsage, "either a TOPIC or --id"},
		{"kick with neither", []string{"kick"}, exitUsage, "either a TOPIC or --id"},
		{"kick --delayed with an id", []string{"kick", "--id", "x", "--delayed"}, exitUsage, "--delayed applies to a TOPIC"},
		{"bad serve flag", []string{"serve", "--log-format", "xml"}, exitUsage, "log-format"},
		{"bad fsync", []string{"serve", "--fsync", "sometimes"}, exitUsage, "neither always nor a positive duration"},
		{"fsync window with redis", []string{"serve", "--fsync", "50ms", "--redis", "redis://127.0.0.1:1/0"}, exitUsage, "Redis's own appendfsync"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			code, _, errOut := run(t, tt.args...)
			if code != tt.wantCode || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("delayq %q: exit %d, stderr %q; want %d and %q", tt.args, code, errOut, tt.wantCode, tt.wantErr)
			}
		})
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	code, out, _ := run(t, "serve", "--help")
	if code != exitOK {
		t.Fatalf("serve --help: exit %d, want 0", code)
	}
	for _, want := range []string{"--http-addr", "$DELAYQ_HTTP_ADDR", "127.0.0.1:7480", "--data-dir", "$DELAYQ_MAX_WAIT", "5m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %q:\n%s", want, out)
		}
	}
}

// TestVersion: --version prints the build's one line to stdout and exits
// 0, before any command is required.
func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := run(t, "--version")
	if code != exitOK || errOut != "" {
		t.Fatalf("--version: exit %d, stderr %q; want 0 and nothing", code, errOut)
	}
	want := buildinfo.Read().String() + "\n"
	if out != want || !strings.HasPrefix(out, "delayq ") {
		t.Errorf("--version printed %q, want %q", out, want)
	}
}

// lockedBuffer lets the test read what serve logs while it runs.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestServeFromEnvironment configures serve only through DELAYQ_*
// variables, uses it, and stops it the way a SIGTERM does.
func TestServeFromEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("DELAYQ_HTTP_ADDR", "127.0.0.1:0")
	t.Setenv("DELAYQ_BEANSTALK_ADDR", "")
	t.Setenv("DELAYQ_DATA_DIR", dir)
	t.Setenv("DELAYQ_LOG_FORMAT", "json")
	t.Setenv("DELAYQ_MAX_BODY", "4")

	ctx, stop := context.WithCancel(t.Context())
	logs := &lockedBuffer{}
	done := make(chan int, 1)
	go func() { done <- Main(ctx, []string{"serve"}, &bytes.Buffer{}, logs) }()

	addr := waitForServing(t, logs)
	if code, _, errOut := run(t, "put", "--server", addr, "t", "12345"); code != exitError || !strings.Contains(errOut, "at most 4") {
		t.Errorf("put of 5 bytes with DELAYQ_MAX_BODY=4: exit %d, stderr %q; want 1, at most 4", code, errOut)
	}
	mustRun(t, "put", "--server", addr, "t", "1234")

	stop()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve after its context ended: exit %d, want 0; logs:\n%s", code, logs)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve still running 10s after its context ended")
	}
	if !strings.Contains(logs.String(), `"msg":"shutdown: store closed"`) {
		t.Errorf("serve logs lack a JSON line for the store closing:\n%s", logs)
	}
}

// waitForServing reads serve's JSON log until it says where it listens,
// and returns the HTTP API's URL.
func waitForServing(t *testing.T, logs *lockedBuffer) string {
	t.Helper()
	return "http://" + waitServing(t, logs, nil).HTTP
}

// serving is where serve's "delayq serving" log line says it listens.
type serving struct{ HTTP, Beanstalk string }

// waitServing reads serve's JSON log until it says where it listens. It
// fails at once when exited (nil for a serve run in-process) is closed
// first: a serve that exited will not log it.
func waitServing(t *testing.T, logs *lockedBuffer, exited <-chan struct{}) serving {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		gone := false
		select {
		case <-exited:
			gone = true // its last words are in logs now
		default:
		}
		for _, line := range strings.Split(logs.String(), "\n") {
			var l struct {
				Msg string
				serving
			}
			if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "delayq serving" {
				return l.serving
			}
		}
		switch {
		case gone:
			t.Fatalf("serve exited before it logged where it listens:\n%s", logs)
		case time.Now().After(deadline):
			t.Fatalf("serve never logged where it listens:\n%s", logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestServeRejectsBadEnvironment(t *testing.T) {
	t.Setenv("DELAYQ_MAX_BODY", "0")
	t.Setenv("DELAYQ_MAX_WAIT", "3h")
	code, _, errOut := run(t, "serve", "--data-dir", t.TempDir())
	if code != exitUsage || !strings.Contains(errOut, "max-body") || !strings.Contains(errOut, "max-wait") {
		t.Errorf("serve with DELAYQ_MAX_BODY=0 DELAYQ_MAX_WAIT=3h: exit %d, stderr %q; want 2 naming both", code, errOut)
	}
}

// TestServerListFailsOver names a dead server first: the commands fail
// over to the live one.
func TestServerListFailsOver(t *testing.T) {
	url := startServer(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	servers := "--server=" + dead + "," + url
	out := mustRun(t, "put", servers, "failover", "hello", "--id", "f-1")
	if !strings.Contains(out, "f-1") {
		t.Errorf("put through %s printed %q, want the id", servers, out)
	}
	if out := mustRun(t, "get", servers, "f-1"); !strings.Contains(out, "hello") {
		t.Errorf("get through %s printed %q, want the job", servers, out)
	}
}
