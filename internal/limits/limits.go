// Package limits holds the bounds that keep one client from costing the
// server everything: open connections per listener, bytes of request
// bodies in flight, and requests per second per client. Each bound, when
// reached, refuses that client with a named error while everyone else is
// served. The flags and defaults are in package config; docs/security.md
// lists them.
package limits

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// ConnListener wraps l so that at most max connections accepted through
// it are open at once. A connection over the bound is handed to refuse
// (which may write a last word, within a short deadline) and closed,
// instead of waiting in the kernel's backlog where the client cannot tell
// a full server from a dead one. max <= 0 means no bound.
func ConnListener(l net.Listener, max int, refuse func(net.Conn)) *Listener {
	return &Listener{Listener: l, max: int64(max), refuse: refuse}
}

// Listener is a net.Listener with a bound on open connections.
type Listener struct {
	net.Listener
	max    int64
	open   atomic.Int64
	refuse func(net.Conn)
}

// Open is how many accepted connections are still open.
func (l *Listener) Open() int64 { return l.open.Load() }

// Accept returns the next connection within the bound, refusing the ones
// over it on the way.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if n := l.open.Add(1); l.max > 0 && n > l.max {
			l.open.Add(-1)
			if l.refuse != nil {
				// A new socket's send buffer takes a short answer without
				// blocking; the deadline covers a peer that is gone.
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				l.refuse(c)
			}
			c.Close()
			continue
		}
		return &countedConn{Conn: c, l: l}, nil
	}
}

// countedConn gives its slot back once, on the first Close.
type countedConn struct {
	net.Conn
	l    *Listener
	once sync.Once
}

func (c *countedConn) Close() error {
	c.once.Do(func() { c.l.open.Add(-1) })
	return c.Conn.Close()
}

// Unwrap returns the accepted connection, for code that needs its type
// (a *tls.Conn's state, a TCP connection's options).
func (c *countedConn) Unwrap() net.Conn { return c.Conn }

// Rates holds one token bucket per client key (a token's name, or a remote
// address when the server runs without tokens). Buckets idle for a while
// are forgotten, so the map does not grow with every address ever seen.
type Rates struct {
	limit rate.Limit
	burst int

	mu      sync.Mutex
	buckets map[string]*bucket
	swept   time.Time
}

type bucket struct {
	lim  *rate.Limiter
	used time.Time
}

// NewRates allows perSecond requests per key with bursts of burst. A
// perSecond <= 0 returns nil, which allows everything.
func NewRates(perSecond float64, burst int) *Rates {
	if perSecond <= 0 {
		return nil
	}
	return &Rates{limit: rate.Limit(perSecond), burst: max(burst, 1), buckets: make(map[string]*bucket)}
}

// idleForget is how long a key's bucket is kept without requests. A full
// bucket refills well within it, so forgetting it grants nothing extra.
const idleForget = 10 * time.Minute

func (r *Rates) get(key string, now time.Time) *rate.Limiter {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.swept) > idleForget {
		for k, b := range r.buckets {
			if now.Sub(b.used) > idleForget {
				delete(r.buckets, k)
			}
		}
		r.swept = now
	}
	b := r.buckets[key]
	if b == nil {
		b = &bucket{lim: rate.NewLimiter(r.limit, r.burst)}
		r.buckets[key] = b
	}
	b.used = now
	return b.lim
}

// Allow takes one request from key's bucket now, or returns a
// *delayq.LimitError saying how long to wait. Safe on a nil Rates.
func (r *Rates) Allow(key string) (retryAfter time.Duration, err error) {
	if r == nil {
		return 0, nil
	}
	now := time.Now()
	res := r.get(key, now).ReserveN(now, 1)
	if d := res.DelayFrom(now); d > 0 {
		res.CancelAt(now)
		return d, &delayq.LimitError{Code: api.CodeRateLimited, Retry: true,
			Reason: fmt.Sprintf("more than %g requests per second (--rate-limit); retry in %v", float64(r.limit), d.Round(time.Millisecond))}
	}
	return 0, nil
}

// Wait blocks until key's bucket has a request for it, for protocols with
// no way to say "slow down" (beanstalkd): the client is slowed, not
// refused. Safe on a nil Rates.
func (r *Rates) Wait(ctx context.Context, key string) error {
	if r == nil {
		return nil
	}
	return r.get(key, time.Now()).Wait(ctx)
}
