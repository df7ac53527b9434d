// Package history samples each topic's figures for the dashboard's
// charts and keeps them in the store: every Interval (10 s, on the wall
// clock's 10-second marks) it samples each topic's jobs by state, how many
// delayed jobs the timer made ready since the previous sample (fires) with
// their lateness, and how many jobs consumers finished and how many
// attempts failed, and merges that into the store's series
// (store.SeriesStore): 10-second buckets kept for a day, one-minute
// buckets kept for a week. Read serves a range of them.
//
// Because the series live in the store, they survive a restart, and over
// Redis every instance merges into the same buckets: job counts come from
// the shared store, so every instance writes the same figures; fires,
// finishes and failures are what this instance did (each instance
// promotes only the due jobs of its own timer buckets, and each consumer
// call reaches one instance), so the buckets add them up to the
// deployment's totals. Lateness is kept as a histogram of fixed buckets
// (10% apart) that merges by adding counts, so percentiles are computed
// at read time over every instance's fires.
//
// Failures are failed attempts as docs/states.md defines them (and the
// alarms count them): each failed attempt once, whether a consumer
// released it, buried it, or let its TTR run out, or the server buried it
// for spent attempts. Finishes are delayq_jobs_finished_total: jobs
// finished with their reservation.
//
// Memory is bounded: besides the store, a topic keeps one ring of
// Span/Interval samples (360 for an hour) in memory for the alarms' recent
// lateness, and at most MaxTopics topics are sampled (in memory and in
// the store). A topic seen when MaxTopics are already sampled is not
// sampled until a sampled topic has had neither jobs, fires, finishes nor
// failures for a whole Span and makes room; its history answers Sampled
// false. Lateness is kept per interval in a histogram, so a busy topic
// costs no more than a quiet one: about 40 KB a topic in memory with the
// defaults, 8 MB at the topic limit.
package history

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/store"
)

// Defaults of Config.
const (
	DefaultInterval  = 10 * time.Second
	DefaultSpan      = time.Hour
	DefaultMaxTopics = 200
)

// Config tunes a History. Zero values take the defaults.
type Config struct {
	// Interval is the time between two samples. Default 10 s, the
	// store's finest bucket: a shorter one merges several samples into a
	// bucket, a longer one leaves buckets empty.
	Interval time.Duration
	// Span is how far back samples are kept: Span/Interval of them per
	// topic. Default one hour.
	Span time.Duration
	// MaxTopics is the most topics sampled. Default 200.
	MaxTopics int
	// Topics returns every topic's job counts (the engine's or store's
	// Topics). Required.
	Topics func(ctx context.Context) ([]delayq.TopicStats, error)
	// Store keeps the series: each sample is merged into it, and Read
	// reads it. Nil keeps the samples in memory only (Topic), and Read
	// fails.
	Store store.SeriesStore
	// Counts returns every topic's finishes and failed attempts on this
	// instance since it started (the engine's metrics.ByTopic); each
	// sample takes what changed since the previous one. Nil counts none.
	Counts func() map[string]Counts
	// Logger receives a line when a sample fails. Default slog.Default().
	Logger *slog.Logger
}

// Counts are a topic's running totals on this instance: jobs finished
// by their consumer, and failed attempts (TTR expiries, releases, buries).
// Gen identifies the run of the totals (metrics.TopicCounts.Gen): totals
// of another Gen started over at zero, so a sample takes the difference
// only within one Gen.
type Counts struct {
	Finishes, Failures uint64
	Gen                uint64
}

// MetricsCounts is Config.Counts from an engine's metrics: finishes as
// delayq_jobs_finished_total counts them, failures as the alarms do:
// delayq_releases_total, delayq_ttr_expired_total and delayq_buries_total
// added up (metrics.TopicCounts.Failures).
func MetricsCounts(m *metrics.Metrics) map[string]Counts {
	by := m.ByTopic()
	out := make(map[string]Counts, len(by))
	for t, c := range by {
		out[t] = Counts{Finishes: c.Finishes, Failures: c.Failures(), Gen: c.Gen}
	}
	return out
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
	// Fires is how many delayed jobs of the topic the timer made ready
	// during Elapsed (read from the store: every instance's timer).
	Fires int
	// Finishes and Failures are the jobs finished and the failed
	// attempts during Elapsed (Counts).
	Finishes, Failures int
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
	counts map[string]Counts  // guarded by mu: Config.Counts at the previous sample
	failed bool               // guarded by mu: the previous store write failed (logged once per streak)
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

// Run samples every Interval, on the wall clock's multiples of it (10:00:00,
// 10:00:10, ...) so that each sample covers one store bucket, until ctx is
// done. A failed sample is logged and skipped: the next one covers its
// fires.
func (h *History) Run(ctx context.Context) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		now := time.Now()
		t.Reset(now.Truncate(h.cfg.Interval).Add(h.cfg.Interval).Sub(now))
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

// Sample takes one sample of every topic now and merges it into the
// store. Topics are admitted in name order while there is room; a sampled
// topic that no longer has jobs gets zero counts, and is dropped once it
// has had neither jobs, fires, finishes nor failures for a whole Span.
// When the store write fails the sample is still kept in memory, and its
// counts are not written again: the store's charts miss that interval.
func (h *History) Sample(ctx context.Context) error {
	stats, err := h.cfg.Topics(ctx)
	if err != nil {
		return err
	}
	var counts map[string]Counts
	if h.cfg.Counts != nil {
		counts = h.cfg.Counts()
	}
	now := time.Now()
	h.mu.Lock()
	elapsed := now.Sub(h.last)
	h.last = now
	// The store lists topics in name order (store.Store.Topics), so
	// topics are admitted in that order without a copy or a sort.
	byName := make(map[string]delayq.TopicStats, len(stats))
	for _, st := range stats {
		if st.Total() == 0 {
			continue // listed only for its pause
		}
		byName[st.Name] = st
		h.admit(st.Name)
	}
	// Only the topics that counted something since the previous sample
	// are sorted, not every topic Counts lists.
	deltas := make(map[string]Counts)
	for name, c := range counts {
		p := h.counts[name]
		if p.Gen != c.Gen {
			p = Counts{} // counted from zero since (metrics.Metrics.Forget)
		}
		if d := (Counts{Finishes: c.Finishes - p.Finishes, Failures: c.Failures - p.Failures}); d != (Counts{}) {
			deltas[name] = d
		}
	}
	for _, name := range slices.Sorted(maps.Keys(deltas)) {
		h.admit(name)
	}
	h.counts = counts
	out := make([]store.SeriesSample, 0, len(h.series))
	for name, s := range h.series {
		st, d := byName[name], deltas[name]
		smp := Sample{
			At: now, Elapsed: elapsed,
			Ready: st.Ready, Delayed: st.Delayed, Reserved: st.Reserved, Buried: st.Buried,
			Fires: s.fires.n, Finishes: int(d.Finishes), Failures: int(d.Failures), Lateness: s.fires.lateness(),
		}
		out = append(out, store.SeriesSample{Topic: name,
			Ready: smp.Ready, Delayed: smp.Delayed, Reserved: smp.Reserved, Buried: smp.Buried,
			Fires: smp.Fires, Finishes: smp.Finishes, Failures: smp.Failures,
			Lateness: s.fires.sparse(), LatenessMax: s.fires.max})
		s.fires.reset()
		s.push(smp, h.size)
		if st.Total() == 0 && smp.Fires == 0 && d == (Counts{}) {
			s.idle++
		} else {
			s.idle = 0
		}
		if s.idle >= h.size {
			delete(h.series, name)
		}
	}
	h.mu.Unlock()
	if h.cfg.Store == nil || len(out) == 0 {
		return nil
	}
	// The sample covers the Interval before now: its middle names the
	// bucket, so a sample taken just after a 10-second mark lands in the
	// bucket that ended there.
	err = h.cfg.Store.AddSeries(ctx, now.Add(-h.cfg.Interval/2), out)
	h.mu.Lock()
	logIt := err != nil && !h.failed
	h.failed = err != nil
	h.mu.Unlock()
	if err != nil {
		if logIt {
			return fmt.Errorf("history: store the samples: %w", err)
		}
		return nil // logged when the streak began
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

// sparse returns the histogram's used buckets: index -> count.
func (a *accumulator) sparse() map[int]int {
	if a.n == 0 {
		return nil
	}
	m := make(map[int]int)
	for i, c := range a.counts {
		if c > 0 {
			m[i] = int(c)
		}
	}
	return m
}

// fromBucket is the histogram of a store bucket.
func fromBucket(b store.SeriesBucket) accumulator {
	var a accumulator
	for i, c := range b.Lateness {
		if i >= 0 && i < latBuckets && c > 0 {
			a.counts[i] += uint32(min(c, math.MaxUint32))
			a.n += c
		}
	}
	a.max = b.LatenessMax
	return a
}

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

// Resolution is one resolution the store keeps the series at: buckets of
// Step, each kept for Keep.
type Resolution struct {
	Step, Keep time.Duration
}

// Resolutions are what Read can serve, finest first: 10-second buckets
// for a day, one-minute buckets for a week (store.SeriesResolutions).
func Resolutions() []Resolution {
	out := make([]Resolution, len(store.SeriesResolutions))
	for i, r := range store.SeriesResolutions {
		out[i] = Resolution{Step: r.Step, Keep: r.Keep}
	}
	return out
}

// DefaultRange is the range Read serves when asked for none.
const DefaultRange = time.Hour

// MaxRange is the longest range Read serves: the coarsest resolution's
// Keep (a week).
func MaxRange() time.Duration { return store.SeriesResolutions[len(store.SeriesResolutions)-1].Keep }

// Series is a topic's samples over a range, read from the store.
type Series struct {
	// Step is the resolution served: the finest one that keeps the whole
	// range. Range is the range.
	Step, Range time.Duration
	// Sampled is false when the topic has no samples in the range and is
	// not sampled now (it has had no jobs, or MaxTopics other topics are
	// sampled).
	Sampled bool
	// Samples are the store's buckets, oldest first, each At its start
	// and Elapsed its Step; buckets nobody wrote are left out.
	Samples []Sample
}

// Read returns topic's samples of the last rng (DefaultRange when 0), at
// the finest resolution that keeps that much: 10 s up to a day, one
// minute up to a week. A range above MaxRange is a CodeBadRange error.
// The figures are every instance's that shares the store.
func (h *History) Read(ctx context.Context, topic string, rng time.Duration) (Series, error) {
	if rng == 0 {
		rng = DefaultRange
	}
	if rng < 0 || rng > MaxRange() {
		return Series{}, delayq.Invalid(delayq.CodeBadRange, "range", "%s is not a duration above 0 and at most %s", rng, fmtDays(MaxRange()))
	}
	if h.cfg.Store == nil {
		return Series{}, fmt.Errorf("history: no store to read the series from")
	}
	var res store.SeriesResolution
	for _, r := range store.SeriesResolutions {
		if r.Keep >= rng {
			res = r
			break
		}
	}
	now := time.Now()
	buckets, err := h.cfg.Store.ReadSeries(ctx, store.SeriesReadParams{Topic: topic, Step: res.Step, From: now.Add(-rng), To: now, Now: now})
	if err != nil {
		return Series{}, err
	}
	out := Series{Step: res.Step, Range: rng, Samples: make([]Sample, len(buckets))}
	for i, b := range buckets {
		a := fromBucket(b)
		out.Samples[i] = Sample{At: b.At, Elapsed: res.Step,
			Ready: b.Ready, Delayed: b.Delayed, Reserved: b.Reserved, Buried: b.Buried,
			Fires: b.Fires, Finishes: b.Finishes, Failures: b.Failures, Lateness: a.lateness()}
	}
	h.mu.Lock()
	out.Sampled = h.series[topic] != nil || len(buckets) > 0
	h.mu.Unlock()
	return out, nil
}

// fmtDays writes d in days when it is whole days ("7d"), else as Go does.
func fmtDays(d time.Duration) string {
	if d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}
