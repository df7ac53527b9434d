package server

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/store/diskstore"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testConfig is a valid configuration on a free loopback port and a fresh
// data directory.
func testConfig(t *testing.T) config.Config {
	t.Helper()
	cfg := config.Default()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.BeanstalkAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.ShutdownTimeout = 10 * time.Second
	// The tests' webhook receivers listen on loopback, which alarms may
	// not reach by default.
	cfg.WebhookAllowNets = []string{"127.0.0.0/8", "::1"}
	return cfg
}

// syncBuffer is a bytes.Buffer safe for the concurrent writes of a logger.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// startServer starts a server and shuts it down at the end of the test.
func startServer(t *testing.T, cfg config.Config, logs *syncBuffer) *Server {
	t.Helper()
	s := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown() = %v", err)
		}
	})
	return s
}

// waitUntil polls cond, which reads observable state, until it holds; it
// fails the test after 10 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// newClient returns a client for s whose idle connections are closed at the
// end of the test, so goleak sees no stray goroutines.
func newClient(t *testing.T, s *Server) *client.Client {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return client.New([]string{s.URL()}, client.HTTPClient(hc), client.Discovery(0))
}

func TestShutdownEndsLongPollThenClosesStore(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	logs := &syncBuffer{}
	s := startServer(t, cfg, logs)
	c := newClient(t, s)

	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		jobs, err := c.Reserve(context.Background(), []string{"orderclose"}, 1, time.Minute)
		done <- result{len(jobs), err}
	}()
	waitUntil(t, "the long-poll parked", func() bool { return s.Engine().Waiting("orderclose") == 1 })

	start := time.Now()
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	select {
	case r := <-done:
		if r.err != nil || r.n != 0 {
			t.Errorf("long-poll during shutdown = %d jobs, %v; want 0 jobs, nil", r.n, r.err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll still blocked 5s after Shutdown returned")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Shutdown took %v with a 1m long-poll in flight, want well under its wait", took)
	}
	// The store's directory lock is free only once the store is closed.
	st, err := diskstore.Open(cfg.DataDir, diskstore.Options{})
	if err != nil {
		t.Fatalf("reopening the store after Shutdown: %v", err)
	}
	if err := st.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	assertOrder(t, logs.String(), "closing listeners", "engine draining", "in-flight requests finished", "engine stopped", "store closed")
}

// assertOrder checks that each step appears in logs, after the one before.
func assertOrder(t *testing.T, logs string, steps ...string) {
	t.Helper()
	at := 0
	for _, step := range steps {
		i := strings.Index(logs[at:], step)
		if i < 0 {
			t.Fatalf("log lacks %q after position %d:\n%s", step, at, logs)
		}
		at += i + len(step)
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	c := newClient(t, s)
	if _, err := c.Put(t.Context(), "orderclose", client.PutRequest{ID: "order-42", Body: []byte("close")}); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}

	s2 := startServer(t, cfg, &syncBuffer{})
	j, err := newClient(t, s2).Get(t.Context(), "order-42")
	if err != nil {
		t.Fatalf("Get after restart = %v", err)
	}
	if string(j.Body) != "close" || j.Topic != "orderclose" {
		t.Errorf("Get after restart = topic %q body %q, want orderclose, close", j.Topic, j.Body)
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	busy := startServer(t, testConfig(t), &syncBuffer{})
	tests := []struct {
		name   string
		modify func(c *config.Config)
		want   string
	}{
		{"invalid config names every field", func(c *config.Config) { c.MaxBody, c.LogFormat = 0, "xml" }, "max-body"},
		{"port in use", func(c *config.Config) { c.HTTPAddr = busy.Addr().String() }, "listen http"},
		{"debug port in use", func(c *config.Config) { c.DebugAddr = busy.Addr().String() }, "listen debug"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cfg := testConfig(t)
			tt.modify(&cfg)
			s := New(cfg, nil)
			err := s.Start(t.Context())
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Start() = %v, want an error containing %q", err, tt.want)
			}
			if err := s.Shutdown(t.Context()); err != nil {
				t.Errorf("Shutdown after a failed Start = %v, want nil", err)
			}
			// A failed start leaves no store open behind it.
			st, err := diskstore.Open(cfg.DataDir, diskstore.Options{})
			if err != nil {
				t.Fatalf("reopening the store after a failed Start: %v", err)
			}
			st.Close()
		})
	}
}

// TestFailedBindFreesEarlierPorts checks that when a later listener cannot
// bind, the ports already bound are given back.
func TestFailedBindFreesEarlierPorts(t *testing.T) {
	t.Parallel()
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return l.Addr().String()
	}
	cfg := testConfig(t)
	cfg.HTTPAddr, cfg.BeanstalkAddr, cfg.DebugAddr = free(), free(), busy.Addr().String()
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err == nil || !strings.Contains(err.Error(), "listen debug") {
		t.Fatalf("Start() = %v, want a listen debug error", err)
	}
	for _, addr := range []string{cfg.HTTPAddr, cfg.BeanstalkAddr} {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Errorf("%s still taken after the failed Start: %v", addr, err)
			continue
		}
		l.Close()
	}
}

func TestRunReturnsWhenContextEnds(t *testing.T) {
	t.Parallel()
	// Run must not care when the signal comes: before it serves, or while
	// it does (seen in its log, not guessed from the clock).
	for _, serving := range []bool{false, true} {
		cfg := testConfig(t)
		logs := &syncBuffer{}
		ctx, cancel := context.WithCancel(t.Context())
		if !serving {
			cancel()
		}
		done := make(chan error, 1)
		go func() { done <- Run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil))) }()
		if serving {
			waitUntil(t, "the server logs that it serves", func() bool { return strings.Contains(logs.String(), `msg="delayq serving"`) })
			cancel()
		}
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("Run(serving %v) = %v, want nil", serving, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("Run(serving %v) still running 10s after its context ended", serving)
		}
		cancel()
	}
}
