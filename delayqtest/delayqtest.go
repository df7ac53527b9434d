// Package delayqtest runs a real delayq server in-process, for tests of
// code that uses delayq (through the Go SDK, package client, or plain HTTP).
// Like net/http/httptest it listens on a loopback port chosen by the system,
// and it keeps its data in a temporary directory that the test removes.
//
//	func TestOrderClose(t *testing.T) {
//		srv := delayqtest.NewServer(t)
//		p := client.NewProducer(srv.URL)
//		...
//	}
//
// The server is the same one `delayq serve` runs (embedded, fsync-durable
// store; HTTP v1 API), so what passes here passes against production.
package delayqtest

import (
	"context"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/server"
)

// Server is a running in-process delayq server. It is stopped when the test
// that created it ends.
type Server struct {
	// URL is the base URL of the HTTP API, "http://127.0.0.1:port".
	URL string
	// Addr is the HTTP API's host:port.
	Addr string
	// BeanstalkAddr is the beanstalkd protocol's host:port.
	BeanstalkAddr string
	// Dir is the data directory; it outlives Stop, so Restart finds every job.
	Dir string

	t   testing.TB
	cfg config.Config

	mu  sync.Mutex
	srv *server.Server // guarded by mu; nil while stopped
}

// Option changes the server's configuration.
type Option func(*config.Config)

// MaxWait sets the longest a reserve may long-poll. Default 5 minutes.
func MaxWait(d time.Duration) Option { return func(c *config.Config) { c.MaxWait = d } }

// MaxBody sets the largest job body in bytes. Default 65,535.
func MaxBody(n int) Option { return func(c *config.Config) { c.MaxBody = n } }

// NewServer starts a server on 127.0.0.1 with a fresh data directory and
// registers its shutdown with t.Cleanup. It fails the test if the server
// cannot start.
func NewServer(t testing.TB, opts ...Option) *Server {
	t.Helper()
	cfg := config.Default()
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.DataDir = t.TempDir()
	cfg.ShutdownTimeout = 5 * time.Second
	cfg.LogLevel = "error"
	cfg.BeanstalkAddr = "127.0.0.1:0" // parallel tests never share a port
	// A test's alarm receiver (httptest) listens on loopback, which a
	// production server's webhooks may not reach by default.
	cfg.WebhookAllowNets = []string{"127.0.0.0/8", "::1"}
	for _, o := range opts {
		o(&cfg)
	}
	s := &Server{t: t, cfg: cfg, Dir: cfg.DataDir}
	s.start()
	s.Addr = s.srv.Addr().String()
	s.URL = "http://" + s.Addr
	// Restart binds the same ports, so clients keep their addresses.
	s.cfg.HTTPAddr = s.Addr
	if ba := s.srv.BeanstalkAddr(); ba != nil {
		s.BeanstalkAddr = ba.String()
		s.cfg.BeanstalkAddr = s.BeanstalkAddr
	}
	t.Cleanup(s.Stop)
	return s
}

// start starts a server on s.cfg.
func (s *Server) start() {
	s.t.Helper()
	srv := server.New(s.cfg, nil)
	if err := srv.Start(context.Background()); err != nil {
		s.t.Fatalf("delayqtest: start server: %v", err)
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
}

// Stop shuts the server down in order (listeners, in-flight requests,
// engine, store), as a SIGTERM would. Calls after the first do nothing.
// Clients then get connection errors, which is how a failover test takes a
// server away.
func (s *Server) Stop() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout+time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		s.t.Errorf("delayqtest: shutdown: %v", err)
	}
}

// Restart stops the server if it runs and starts it again on the same data
// directory and address: every acknowledged job is still there.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	// The old listener is closed; on a busy machine the port may take a
	// moment to be free again.
	for i := 0; ; i++ {
		ln, err := net.Listen("tcp", s.Addr)
		if err == nil {
			ln.Close()
			break
		}
		if i == 50 {
			s.t.Fatalf("delayqtest: restart: port %s stays busy: %v", s.Addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	s.start()
}

// Engine returns the running server's engine, for tests inside this module
// that need to look past the HTTP API. Nil while stopped.
func (s *Server) Engine() *engine.Engine {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return nil
	}
	return s.srv.Engine()
}
