// Package history keeps the last hour of each topic's figures in memory,
// for the dashboard's charts: every Interval (10 s) it samples each
// topic's jobs by state, and how many delayed jobs the timer made ready
// since the previous sample (fires) with their lateness percentiles.
//
// Memory is bounded: a topic keeps one ring of Span/Interval samples (360
// for an hour), and at most MaxTopics topics are sampled. A topic seen
// when MaxTopics are already sampled is not sampled until a sampled topic
// has had neither jobs nor fires for a whole Span and makes room; its
// history answers Sampled false. Lateness is kept per interval in a
// histogram of fixed buckets (10% apart), so a busy topic costs no more
// than a quiet one: about 40 KB a topic with the defaults, 8 MB at the
// topic limit.
//
// Job counts come from the store, so they are the same on every instance
// that shares it (Redis); fires and lateness are what this instance's own
// timer did, since each instance promotes only the due jobs of its own
// timer buckets.
package history

import (
	"context"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq"
)

// Defaults of Config.
const (
	DefaultInterval  = 10 * time.Second
	DefaultSpan      = time.Hour
	DefaultMaxTopics = 200
)

// Config tunes a History. Zero values take the defaults.
type Config struct {
	// Interval is the time between two samples. Default 10 s.
	Interval time.Duration
	// Span is how far back samples are kept: Span/Interval of them per
	// topic. Default one hour.
	Span time.Duration
	// MaxTopics is the most topics sampled. Default 200.
	MaxTopics int
	// Topics returns every topic's job counts (the engine's or store's
	// Topics). Required.
	Topics func(ctx context.Context) ([]delayq.TopicStats, error)
	// Logger receives a line when a sample fails. Default slog.Default().
	Logger *slog.Logger
}

// Sample is one topic's figures at one moment.
type Sample struct {
	// At is when the sample was taken.
	At time.Time
	// Elapsed is the time since the previous sample (or since the
	// history began): the period Fires and Lateness cover.
	Elapsed time.Duration
	// Jobs of the topic in each state at At.
	Ready, Delayed, Reserved, Buried int
	// Fires is how many delayed jobs of the topic this instance's timer
	// made ready during Elapsed.
	Fires int
	// Lateness of those fires; zero when Fires is 0.
	Lateness Lateness
}

// Lateness sums up how late fires were: percentiles and the maximum.
// Percentiles are the upper edge of a histogram bucket (exactly 0 for
// fires on time, at most 100 µs below 100 µs, else at most 10% above the
// true value; never above Max); Max is exact.
type Lateness struct {
	P50, P90, P99, Max time.Duration
}

// FiresPerSecond is Fires over Elapsed.
func (s Sample) FiresPerSecond() float64 {
	if s.Elapsed <= 0 {
		return 0
	}
	return float64(s.Fires) / s.Elapsed.Seconds()
}

// History is the sampler and its rings. Its methods are safe for
// concurrent use.
type History struct {
	cfg  Config
	size int // samples kept per topic

	mu     sync.Mutex
	series map[string]*series // guarded by mu: the sampled topics
	last   time.Time          // guarded by mu: when the previous sample was taken (or New ran)
}

// series is one topic's ring of samples and the fires since its last one.
type series struct {
	ring  []Sample // oldest at start; len grows to size, then wraps
	start int
	idle  int // consecutive samples with no jobs and no fires
	fires accumulator
}

// New returns an empty history. Call Run to sample, or Sample to take one
// sample now.
func New(cfg Config) *History {
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Span <= 0 {
		cfg.Span = DefaultSpan
	}
	if cfg.MaxTopics <= 0 {
		cfg.MaxTopics = DefaultMaxTopics
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &History{
		cfg:    cfg,
		size:   max(int(cfg.Span/cfg.Interval), 1),
		series: make(map[string]*series),
		last:   time.Now(),
	}
}

// Config returns the configuration with defaults applied.
func (h *History) Config() Config { return h.cfg }

// Size is how many samples a topic keeps.
func (h *History) Size() int { return h.size }

// Fired records delayed jobs of topic made ready by the timer, one
// lateness each. It is the engine's Config.Fired hook: quick, never
// blocking beyond a short mutex.
func (h *History) Fired(topic string, lateness []time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.admit(topic)
	if s == nil {
		return
	}
	for _, d := range lateness {
		s.fires.add(d)
	}
}

// admit returns topic's series, making one if there is room; nil when
// MaxTopics topics are sampled already. Requires mu.
func (h *History) admit(topic string) *series {
	if s := h.series[topic]; s != nil {
		return s
	}
	if len(h.series) >= h.cfg.MaxTopics {
		return nil
	}
	s := &series{ring: make([]Sample, 0, h.size)}
	h.series[topic] = s
	return s
}

// Run samples every Interval until ctx is done. A failed sample is
// logged and skipped: the next one covers its fires.
func (h *History) Run(ctx context.Context) error {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := h.Sample(ctx); err != nil && ctx.Err() == nil {
				h.cfg.Logger.Warn("history sample failed; the next one covers its fires", "err", err)
			}
		}
	}
}

// Sample takes one sample of every topic now. Topics are admitted in name
// order while there is room; a sampled topic that no longer has jobs gets
// zero counts, and is dropped once it has had neither jobs nor fires for
// a whole Span.
func (h *History) Sample(ctx context.Context) error {
	stats, err := h.cfg.Topics(ctx)
	if err != nil {
		return err
	}
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	elapsed := now.Sub(h.last)
	h.last = now
	byName := make(map[string]delayq.TopicStats, len(stats))
	for _, st := range slices.SortedFunc(slices.Values(stats), func(a, b delayq.TopicStats) int {
		return strings.Compare(a.Name, b.Name)
	}) {
		if st.Total() == 0 {
			continue // listed only for its pause
		}
		byName[st.Name] = st
		h.admit(st.Name)
	}
	for name, s := range h.series {
		st := byName[name]
		smp := Sample{
			At: now, Elapsed: elapsed,
			Ready: st.Ready, Delayed: st.Delayed, Reserved: st.Reserved, Buried: st.Buried,
			Fires: s.fires.n, Lateness: s.fires.lateness(),
		}
		s.fires.reset()
		s.push(smp, h.size)
		if st.Total() == 0 && smp.Fires == 0 {
			s.idle++
		} else {
			s.idle = 0
		}
		if s.idle >= h.size {
			delete(h.series, name)
		}
	}
	return nil
}

// push appends smp, dropping the oldest sample when the ring is full.
func (s *series) push(smp Sample, size int) {
	if len(s.ring) < size {
		s.ring = append(s.ring, smp)
		return
	}
	s.ring[s.start] = smp
	s.start = (s.start + 1) % size
}

// Topic returns topic's samples, oldest first, and whether the topic is
// sampled at all (false: it has had no jobs, or MaxTopics other topics
// are sampled).
func (h *History) Topic(topic string) (samples []Sample, sampled bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[topic]
	if s == nil {
		return []Sample{}, false
	}
	out := make([]Sample, 0, len(s.ring))
	out = append(out, s.ring[s.start:]...)
	out = append(out, s.ring[:s.start]...)
	return out, true
}

// Sampled returns how many topics are sampled now.
func (h *History) Sampled() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.series)
}

// Lateness buckets: bucket 0 holds latenesses of 0 (stores keep whole
// milliseconds, so on time is often exactly 0), bucket 1 those up to
// latMin, and bucket i > 1 those in (latMin·g^(i-2), latMin·g^(i-1)] with
// g = latGrowth; the last also holds everything above (100 µs · 1.1^254
// is about 37 days).
const (
	latMin     = 100 * time.Microsecond
	latGrowth  = 1.1
	latBuckets = 256
)

var logGrowth = math.Log(latGrowth)

// accumulator is a lateness histogram of one interval.
type accumulator struct {
	n      int
	max    time.Duration
	counts [latBuckets]uint32
}

func (a *accumulator) add(d time.Duration) {
	d = max(d, 0) // a store never fires early; a clock step must not index below 0
	a.n++
	a.max = max(a.max, d)
	a.counts[bucketOf(d)]++
}

func (a *accumulator) reset() { *a = accumulator{} }

func bucketOf(d time.Duration) int {
	switch {
	case d <= 0:
		return 0
	case d <= latMin:
		return 1
	}
	i := 1 + int(math.Ceil(math.Log(float64(d)/float64(latMin))/logGrowth))
	return min(max(i, 2), latBuckets-1)
}

// upper is the largest lateness bucket i holds (the last one: unbounded).
func upper(i int) time.Duration {
	if i == 0 {
		return 0
	}
	return time.Duration(float64(latMin) * math.Pow(latGrowth, float64(i-1)))
}

// lateness sums up the interval; zero when nothing fired.
func (a *accumulator) lateness() Lateness {
	if a.n == 0 {
		return Lateness{}
	}
	return Lateness{P50: a.quantile(0.50), P90: a.quantile(0.90), P99: a.quantile(0.99), Max: a.max}
}

// quantile is the upper edge of the bucket holding the q-th lateness (by
// rank ceil(q·n)), capped at the maximum seen.
func (a *accumulator) quantile(q float64) time.Duration {
	rank := max(int(math.Ceil(q*float64(a.n))), 1)
	seen := 0
	for i, c := range a.counts {
		seen += int(c)
		if seen >= rank {
			if i == latBuckets-1 {
				return a.max
			}
			return min(upper(i), a.max)
		}
	}
	return a.max
}

// LatenessP99 is the highest 99th percentile of topic's fire lateness
// among the samples taken after since that had fires, and false when
// none had (the alarms' lateness_p99_over).
func (h *History) LatenessP99(topic string, since time.Time) (time.Duration, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.series[topic]
	if s == nil {
		return 0, false
	}
	var p99 time.Duration
	found := false
	for _, smp := range s.ring {
		if smp.At.After(since) && smp.Fires > 0 {
			p99, found = max(p99, smp.Lateness.P99), true
		}
	}
	return p99, found
}
