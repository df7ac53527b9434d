package store

import (
	"testing"
	"time"
)

// The delays are pinned: redisstore's Lua repeats this arithmetic, and
// storetest expects these exact values from every store.
func TestBackoffDelay(t *testing.T) {
	b := Backoff{Initial: time.Second, Max: 10 * time.Second, Factor: 2, Jitter: 0.1}
	for _, c := range []struct {
		b        Backoff
		id       string
		attempts int
		want     time.Duration
	}{
		{b, "a", 1, 1094 * time.Millisecond},
		{b, "a", 2, 2094 * time.Millisecond},
		{b, "a", 3, 3673 * time.Millisecond},
		{b, "a", 4, 8740 * time.Millisecond},
		{b, "a", 5, 10 * time.Second}, // capped after the jitter
		{b, "a", 6, 9991 * time.Millisecond},
		{b, "job-1", 1, 959 * time.Millisecond},
		{b, "job-2", 2, 1862 * time.Millisecond},
		{Backoff{Initial: 1500 * time.Millisecond, Max: time.Hour, Factor: 1.5}, "x", 4, 5062 * time.Millisecond},
		{Backoff{Initial: time.Second, Max: time.Minute, Factor: 1}, "x", 50, time.Second},
		{Backoff{Initial: time.Second, Max: time.Minute, Factor: 3}, "x", 1 << 40, time.Minute}, // no overflow, no long loop
		{Backoff{}, "x", 3, 0},
	} {
		if got := c.b.Delay(c.id, c.attempts); got != c.want {
			t.Errorf("%+v.Delay(%q, %d) = %s, want %s", c.b, c.id, c.attempts, got, c.want)
		}
	}
}

// The jitter spreads jobs on both sides and stays within its bounds.
func TestBackoffJitterSpread(t *testing.T) {
	b := Backoff{Initial: 10 * time.Second, Max: time.Hour, Factor: 2, Jitter: 0.5}
	lo, hi := time.Hour, time.Duration(0)
	for i := range 1000 {
		d := b.Delay("job-"+string(rune('a'+i%26))+string(rune('a'+i/26)), 1)
		lo, hi = min(lo, d), max(hi, d)
	}
	if lo < 5*time.Second || hi > 15*time.Second || lo > 6*time.Second || hi < 14*time.Second {
		t.Errorf("delays of 1000 jobs with 10s ±50%% span [%s, %s], want about [5s, 15s]", lo, hi)
	}
}

func TestJitterHashPinned(t *testing.T) {
	// The Lua port (redisstore) must give the same numbers.
	for _, c := range []struct {
		id   string
		n    int
		want uint32
	}{{"a", 1, 4173474068}, {"job-1", 1, 1268172214}, {"job-2", 2, 674716067}} {
		if got := JitterHash(c.id, c.n); got != c.want {
			t.Errorf("JitterHash(%q, %d) = %d, want %d", c.id, c.n, got, c.want)
		}
	}
}
