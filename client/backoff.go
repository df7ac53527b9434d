package client

import (
	"math/rand/v2"
	"time"
)

// Backoff computes how long to wait before retry number attempt (1 for the
// first retry). Consumers use it to delay a failed job's next run.
type Backoff func(attempt int) time.Duration

// ExponentialBackoff returns a Backoff that waits base·2^(attempt-1), at
// most max, with "equal jitter": a random half of each wait, so failing jobs
// that started together do not retry in lockstep yet never retry sooner than
// half the nominal wait.
func ExponentialBackoff(base, max time.Duration) Backoff {
	if base <= 0 {
		base = time.Second
	}
	if max < base {
		max = base
	}
	return func(attempt int) time.Duration {
		d := nominal(base, max, attempt)
		half := d / 2
		return half + rand.N(d-half+1)
	}
}

// nominal is base·2^(attempt-1) capped at max, without overflow.
func nominal(base, max time.Duration, attempt int) time.Duration {
	if attempt < 1 {
		attempt = 1
	}
	d := base
	for i := 1; i < attempt; i++ {
		if d >= max/2 {
			return max
		}
		d *= 2
	}
	return min(d, max)
}

// DefaultBackoff is the consumer's default: 1 s doubling up to 10 minutes,
// with jitter.
var DefaultBackoff = ExponentialBackoff(time.Second, 10*time.Minute)
