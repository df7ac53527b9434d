// Package beanstalk is delayq's beanstalkd 1.12 front end: a TCP server
// that speaks the protocol of beanstalkd's doc/protocol.txt, so every
// beanstalkd client library works with delayq.
//
// It translates commands to engine calls and nothing else: a tube is a
// topic, a job's seq is its beanstalkd id, and jobs live only in the
// engine's store. What it keeps is per-connection state (the tube used,
// the tubes watched, the reservations this connection holds) and
// per-process statistics for stats and stats-tube. A reservation belongs
// to its connection, as in beanstalkd: a closed connection releases its
// reserved jobs, and no other connection can delete, release, bury or
// touch them.
package beanstalk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/limits"
)

// DefaultAddr is where the beanstalkd front end listens unless told
// otherwise (beanstalkd's own port).
const DefaultAddr = "127.0.0.1:11300"

// Limits bound what one client can cost the server. Zero values take the
// documented defaults.
type Limits struct {
	// MaxConns is the most open connections; more are closed at once.
	// Default 10,000.
	MaxConns int
	// WriteTimeout is how long a reply may take to be written; a client
	// that does not read its replies is disconnected after it (after at
	// most 1.25 times it: the deadline is renewed lazily, see flush).
	// Default 30s.
	WriteTimeout time.Duration
	// BodyTimeout is how long a put's body may take to arrive after its
	// command line; a client that never finishes it is disconnected.
	// Default 60s.
	BodyTimeout time.Duration
	// IdleTimeout closes a connection that sends no command for this long,
	// except while it waits in a reserve or holds reserved jobs. Default 0:
	// never, as beanstalkd.
	IdleTimeout time.Duration
}

func (l Limits) withDefaults() Limits {
	if l.MaxConns <= 0 {
		l.MaxConns = 10000
	}
	if l.WriteTimeout <= 0 {
		l.WriteTimeout = 30 * time.Second
	}
	if l.BodyTimeout <= 0 {
		l.BodyTimeout = 60 * time.Second
	}
	return l
}

// Server serves the beanstalkd protocol over an engine. Set its fields,
// then call Serve; a Server must not be copied after first use.
type Server struct {
	Engine *engine.Engine
	Limits Limits
	Logger *slog.Logger
	// Admit, when set, names the principal of a new connection (from its
	// client certificate) before its first command; nil refuses every
	// command but quit. Without Admit every connection may do everything.
	Admit func(ctx context.Context, nc net.Conn) *auth.Principal
	// Rates, when set, spaces each client's commands to its request rate.
	Rates *limits.Rates

	initOnce sync.Once
	limits   Limits
	started  time.Time
	instance string // beanstalkd's random "id" in stats

	ctx    context.Context // canceled by Shutdown: ends waiting reserves
	cancel context.CancelFunc

	mu        sync.Mutex
	closing   bool                      // guarded by mu
	listeners map[net.Listener]struct{} // guarded by mu
	conns     map[*conn]struct{}        // guarded by mu
	wg        sync.WaitGroup            // one per connection goroutine

	tubes tubes
	stats counters
}

// counters are the per-process figures of stats; all atomic.
type counters struct {
	ops        [numOps]atomic.Uint64
	totalJobs  atomic.Uint64
	totalConns atomic.Uint64
	producers  atomic.Int64
	workers    atomic.Int64
	waiting    atomic.Int64
}

func (s *Server) init() {
	s.initOnce.Do(func() {
		s.limits = s.Limits.withDefaults()
		s.started = time.Now()
		var b [8]byte
		_, _ = rand.Read(b[:])
		s.instance = hex.EncodeToString(b[:])
		s.ctx, s.cancel = context.WithCancel(context.Background())
		s.listeners = make(map[net.Listener]struct{})
		s.conns = make(map[*conn]struct{})
		s.tubes.init()
	})
}

func (s *Server) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}

// ErrServerClosed is returned by Serve after Shutdown.
var ErrServerClosed = errors.New("beanstalk: server closed")

// Serve accepts connections on l and serves each in its own goroutine
// until Shutdown; it then returns ErrServerClosed. Connections over
// Limits.MaxConns are closed as soon as they are accepted.
func (s *Server) Serve(l net.Listener) error {
	s.init()
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return ErrServerClosed
	}
	s.listeners[l] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.listeners, l)
		s.mu.Unlock()
	}()
	var backoff time.Duration
	for {
		nc, err := l.Accept()
		if err != nil {
			if s.isClosing() {
				return ErrServerClosed
			}
			if passing(err) {
				backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
				time.Sleep(backoff)
				continue
			}
			return err
		}
		backoff = 0
		s.start(nc)
	}
}

// passing reports accept errors such as EMFILE that may clear up: the loop
// backs off and tries again instead of giving up on every client.
func passing(err error) bool {
	var te interface{ Temporary() bool }
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.As(err, &te) && te.Temporary()
}

func (s *Server) isClosing() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closing
}

// start registers a new connection and serves it, or closes it when the
// server is full or shutting down.
func (s *Server) start(nc net.Conn) {
	s.mu.Lock()
	if s.closing || len(s.conns) >= s.limits.MaxConns {
		full := !s.closing
		s.mu.Unlock()
		if full {
			s.logger().Warn("beanstalk connection refused: too many connections", "remote", nc.RemoteAddr().String(), "max_conns", s.limits.MaxConns)
		}
		nc.Close()
		return
	}
	c := newConn(s, nc)
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	s.stats.totalConns.Add(1)
	go func() {
		defer s.wg.Done()
		c.serve()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}()
}

// Shutdown stops accepting, lets each connection finish the command it is
// running (a waiting reserve answers TIMED_OUT), closes every connection
// (which releases its reserved jobs) and returns when all are gone, or
// closes them hard when ctx ends first.
func (s *Server) Shutdown(ctx context.Context) error {
	s.init()
	s.mu.Lock()
	s.closing = true
	for l := range s.listeners {
		l.Close()
	}
	for c := range s.conns {
		c.stopReading()
	}
	s.mu.Unlock()
	s.cancel()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		<-done
		return ctx.Err()
	}
}

// connCount returns how many connections are open.
func (s *Server) connCount() int {
	s.init() // Serve may not have run yet: init must not race this read
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.conns)
}
