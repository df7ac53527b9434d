package store

import (
	"strconv"
	"time"

	"github.com/delayq/delayq"
)

// Backoff is a topic's retry delay (its policy's "backoff"): how long a job
// waits after a consumer released it without a delay, or after its TTR ran
// out, before it is ready again. The n-th attempt's delay is
// Initial·Factor^(n-1), at most Max, spread by ±Jitter of itself.
//
// It is in package store, not the engine, because a TTR expiry happens
// inside Store.Tick: every store applies the same BackoffDelay, and
// redisstore's Lua repeats its arithmetic step for step (the same float64
// operations in the same order), so storetest pins exact results.
type Backoff struct {
	Initial time.Duration // delay of the first attempt; > 0
	Max     time.Duration // no delay is longer; >= Initial
	Factor  float64       // growth per attempt; >= 1
	Jitter  float64       // spread as a fraction of the delay, in [0, 1]
}

// MaxBackoffSteps bounds the growth of a backoff: past this attempt the
// delay grows no more (it has long reached Max for any factor a policy
// takes), so a store's Tick never loops long over a job with many
// attempts.
const MaxBackoffSteps = 1000

// Delay is BackoffDelay of b.
func (b Backoff) Delay(id string, attempts int) time.Duration { return BackoffDelay(b, id, attempts) }

// BackoffDelay is the delay of job id after its attempts-th attempt, in
// whole milliseconds (the stores' precision). The jitter is not random:
// it comes from JitterHash(id, attempts), so the same job on the same
// attempt always waits the same, on every store and every instance, and
// jobs released together still spread out. A zero Backoff delays nothing.
func BackoffDelay(b Backoff, id string, attempts int) time.Duration {
	initial, maxMS := float64(b.Initial.Milliseconds()), float64(b.Max.Milliseconds())
	if initial <= 0 {
		return 0
	}
	if maxMS < initial {
		maxMS = initial
	}
	d := initial
	if b.Factor > 1 {
		// Multiply step by step rather than call Pow: the Lua side must
		// reach the same float64, and libm's pow need not agree with Go's.
		for i := 1; i < min(attempts, MaxBackoffSteps) && d < maxMS; i++ {
			d = float64(d * b.Factor)
		}
	}
	if d > maxMS {
		d = maxMS
	}
	if b.Jitter > 0 {
		u := float64(JitterHash(id, attempts)) / 4294967296 // [0, 1)
		// Explicit conversions keep the compiler from fusing the
		// multiply-adds, which would round differently from Lua.
		spread := float64(float64(2*u) - 1)
		d = float64(d * float64(1+float64(b.Jitter*spread)))
	}
	if d > maxMS {
		d = maxMS
	}
	if d < 0 {
		d = 0
	}
	return time.Duration(int64(d)) * time.Millisecond
}

// JitterHash is the 32-bit FNV-1a hash of id, ':' and attempts in
// decimal, finished with murmur3's fmix32 (FNV alone leaves the high bits
// of similar ids alike, and the jitter reads the high bits): the source of
// BackoffDelay's jitter. It needs only xor, shifts and 32-bit multiplies,
// which Redis's Lua can do exactly (redisstore's backoffLua).
func JitterHash(id string, attempts int) uint32 {
	const prime = 16777619
	h := uint32(2166136261)
	for _, s := range []string{id, ":", strconv.Itoa(attempts)} {
		for i := 0; i < len(s); i++ {
			h ^= uint32(s[i])
			h *= prime
		}
	}
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

// ApplyTimeoutBackoff is ApplyTimeout followed by the topic's backoff:
// a job made ready by its TTR running out waits, delayed, until the
// expired Deadline plus its backoff. A buried job (attempts spent) and a
// topic without a backoff are left as ApplyTimeout made them. It reports
// whether the job went delayed, so Tick can count it apart from the
// jobs it made ready.
func ApplyTimeoutBackoff(j *delayq.Job, bs map[string]Backoff) bool {
	ApplyTimeout(j)
	return BackOff(j, bs)
}

// BackOff delays j, just made ready by a TTR expiry (Due = the expired
// Deadline), by its topic's backoff in bs. It reports whether it did.
func BackOff(j *delayq.Job, bs map[string]Backoff) bool {
	if j.State != delayq.StateReady {
		return false
	}
	b, ok := bs[j.Topic]
	if !ok {
		return false
	}
	d := b.Delay(j.ID, j.Attempts)
	if d <= 0 {
		return false
	}
	j.State, j.Due = delayq.StateDelayed, j.Due.Add(d)
	return true
}
