// Package limits holds the bounds that keep one client from costing the
// server everything: open connections per listener and per client, bytes
// of requests and answers in flight, and requests per second per client. Each bound, when
// reached, refuses that client with a named error while everyone else is
// served. The flags and defaults are in package config; docs/security.md
// lists them.
package limits

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Rates holds one token bucket per client key (a token's name, or a remote
// address when the server runs without tokens). Buckets idle for a while
// are forgotten, so the map does not grow with every address ever seen.
type Rates struct {
	limit  rate.Limit
	burst  int
	reason func(wait time.Duration) string // the refusal's message

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
	return newRates(perSecond, burst, func(d time.Duration) string {
		return fmt.Sprintf("more than %g requests per second (--rate-limit); retry in %v", perSecond, d.Round(time.Millisecond))
	})
}

// NewFailures allows perMinute failures (of logins and tokens) per key,
// all of them at once at most: once they are spent, Check refuses the key
// until one has come back. perMinute <= 0 returns nil, which allows
// everything.
func NewFailures(perMinute int) *Rates {
	return newRates(float64(perMinute)/60, perMinute, func(d time.Duration) string {
		return fmt.Sprintf("more than %d failed logins or unknown tokens a minute from this address (--max-auth-failures); retry in %v", perMinute, (d+time.Second-1)/time.Second*time.Second)
	})
}

func newRates(perSecond float64, burst int, reason func(wait time.Duration) string) *Rates {
	if perSecond <= 0 {
		return nil
	}
	return &Rates{limit: rate.Limit(perSecond), burst: max(burst, 1), reason: reason, buckets: make(map[string]*bucket)}
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
		return d, r.refusal(d)
	}
	return 0, nil
}

// Check refuses key, as Allow does, when its bucket is empty now, but
// takes nothing from it: a login is checked before it runs and charged
// (Allow) only when it fails. Safe on a nil Rates.
func (r *Rates) Check(key string) (retryAfter time.Duration, err error) {
	if r == nil {
		return 0, nil
	}
	now := time.Now()
	lim := r.get(key, now)
	if tok := lim.TokensAt(now); tok < 1 {
		d := time.Duration((1 - tok) / float64(r.limit) * float64(time.Second))
		return d, r.refusal(d)
	}
	return 0, nil
}

func (r *Rates) refusal(d time.Duration) error {
	return &delayq.LimitError{Code: api.CodeRateLimited, Retry: true,
		Reason: r.reason(d)}
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
