package store

import (
	"context"
	"fmt"
	"time"
)

// SeriesStore keeps the dashboard's chart series: per topic, fixed time
// buckets of job counts by state, fires, finishes, failures and a
// lateness histogram, at every resolution of SeriesResolutions. Every
// Store is one (Store embeds it). The series live in the store, not in an
// instance's memory, so they survive a restart and, over Redis, every
// instance writes into the same buckets and reads their sum.
//
// Merging is what makes a shared bucket right whichever instances wrote
// it and in whatever order: counters (Fires, Finishes, Failures, the
// lateness histogram) add up, LatenessMax keeps the largest, and the
// gauges (Ready, Delayed, Reserved, Buried) keep the last value written,
// because every instance reads them from the same shared store and so
// writes the same figures.
//
// Expiry is by bucket time, never by a scan: a bucket of resolution r is
// kept until its start plus r.Keep. Reads never return a bucket past
// that (relative to the Now they are given); each store also drops it by
// itself: redisstore with PEXPIREAT on the bucket's key, diskstore by
// deleting whole expired time ranges of its series keys (one range
// delete, whatever the history holds), memstore by overwriting ring
// slots.
type SeriesStore interface {
	// AddSeries merges samples into the bucket holding at, at every
	// resolution of SeriesResolutions (the 10-second bucket and the
	// one-minute bucket each receive the whole sample: the roll-up is
	// done by the write, not by a later pass). Samples of one call have
	// distinct topics. An invalid sample (SeriesSample.Check) fails the
	// whole call and writes nothing.
	//
	// A series write is not a transition, but it must survive a
	// restart, kill -9 included: it is durable (written to the OS at
	// least, as the store's fsync mode says) when AddSeries returns.
	AddSeries(ctx context.Context, at time.Time, samples []SeriesSample) error

	// ReadSeries returns the buckets of p.Topic at resolution p.Step whose
	// start lies in [p.From, p.To] and that have not expired at p.Now
	// (start + Keep > p.Now), oldest first. Buckets nobody wrote are left
	// out. A Step that is not one of SeriesResolutions is an error. It is
	// a read: it changes nothing.
	ReadSeries(ctx context.Context, p SeriesReadParams) ([]SeriesBucket, error)
}

// SeriesResolution is one resolution the series are kept at: buckets of
// Step, each kept for Keep after its start.
type SeriesResolution struct {
	Step, Keep time.Duration
}

// SeriesResolutions are the resolutions every store keeps, finest first:
// 10-second buckets for a day, one-minute buckets for a week. Each Step
// divides the next and every Keep is a whole number of Steps.
var SeriesResolutions = []SeriesResolution{
	{Step: 10 * time.Second, Keep: 24 * time.Hour},
	{Step: time.Minute, Keep: 7 * 24 * time.Hour},
}

// SeriesLatenessBuckets is how many lateness histogram buckets a sample
// may use: indexes 0 to SeriesLatenessBuckets-1. What a bucket means is
// the writer's affair (package history: 10% apart); the store only adds
// counts of the same index.
const SeriesLatenessBuckets = 256

// SeriesResolutionOf returns the resolution whose Step is step.
func SeriesResolutionOf(step time.Duration) (SeriesResolution, bool) {
	for _, r := range SeriesResolutions {
		if r.Step == step {
			return r, true
		}
	}
	return SeriesResolution{}, false
}

// SeriesSample is what one instance adds to one topic's buckets.
type SeriesSample struct {
	Topic string
	// Gauges: the topic's jobs in each state when sampled.
	Ready, Delayed, Reserved, Buried int
	// Counters of the period sampled: delayed jobs made ready by the
	// timer, jobs finished by their consumer, failed attempts (TTR
	// expiries, releases, buries).
	Fires, Finishes, Failures int
	// Lateness counts fires by histogram bucket index; LatenessMax is
	// the largest lateness among them.
	Lateness    map[int]int
	LatenessMax time.Duration
}

// Check refuses a sample a store cannot merge: no topic, a negative
// figure, or a lateness index out of range.
func (s SeriesSample) Check() error {
	if s.Topic == "" {
		return fmt.Errorf("store: series sample without a topic")
	}
	for _, v := range []int{s.Ready, s.Delayed, s.Reserved, s.Buried, s.Fires, s.Finishes, s.Failures} {
		if v < 0 {
			return fmt.Errorf("store: series sample of %q: negative count %d", s.Topic, v)
		}
	}
	if s.LatenessMax < 0 {
		return fmt.Errorf("store: series sample of %q: negative lateness %v", s.Topic, s.LatenessMax)
	}
	for i, n := range s.Lateness {
		if i < 0 || i >= SeriesLatenessBuckets || n < 0 {
			return fmt.Errorf("store: series sample of %q: lateness bucket %d count %d out of range", s.Topic, i, n)
		}
	}
	return nil
}

// SeriesReadParams are the arguments of SeriesStore.ReadSeries.
type SeriesReadParams struct {
	Topic    string
	Step     time.Duration // one of SeriesResolutions' Steps
	From, To time.Time     // bucket starts, both inclusive
	Now      time.Time     // buckets expired at Now are left out
}

// SeriesBucket is one bucket of a topic's series as merged from every
// sample written into it.
type SeriesBucket struct {
	At                               time.Time // the bucket's start (UTC, a multiple of its Step)
	Ready, Delayed, Reserved, Buried int       // the last sample's gauges
	Fires, Finishes, Failures        int       // sums
	Lateness                         map[int]int
	LatenessMax                      time.Duration
}

// Merge adds s into b as every store merges (SeriesStore): counters add,
// the maximum keeps the largest, gauges take s's values.
func (b *SeriesBucket) Merge(s SeriesSample) {
	b.Ready, b.Delayed, b.Reserved, b.Buried = s.Ready, s.Delayed, s.Reserved, s.Buried
	b.Fires += s.Fires
	b.Finishes += s.Finishes
	b.Failures += s.Failures
	b.LatenessMax = max(b.LatenessMax, s.LatenessMax)
	for i, n := range s.Lateness {
		if n == 0 {
			continue
		}
		if b.Lateness == nil {
			b.Lateness = make(map[int]int)
		}
		b.Lateness[i] += n
	}
}

// Clone returns a deep copy of b.
func (b *SeriesBucket) Clone() SeriesBucket {
	c := *b
	if b.Lateness != nil {
		c.Lateness = make(map[int]int, len(b.Lateness))
		for i, n := range b.Lateness {
			c.Lateness[i] = n
		}
	}
	return c
}

// SeriesBucketStart is the start of the bucket of step holding t, in
// whole seconds since the Unix epoch (floor, so times before 1970 fall
// in the bucket before).
func SeriesBucketStart(t time.Time, step time.Duration) int64 {
	s, u := t.Unix(), int64(step/time.Second)
	q := s / u
	if s%u < 0 {
		q--
	}
	return q * u
}

// SeriesExpired says whether the bucket of r starting at start (Unix
// seconds) has expired at now.
func SeriesExpired(r SeriesResolution, start int64, now time.Time) bool {
	return !time.Unix(start, 0).Add(r.Keep).After(now)
}

// SeriesBounds turns a read's time range into the first and last bucket
// starts (Unix seconds) a store must look at: [From, To] clipped to the
// buckets not expired at Now, and to at most Keep/Step buckets.
func SeriesBounds(p SeriesReadParams) (r SeriesResolution, first, last int64, err error) {
	r, ok := SeriesResolutionOf(p.Step)
	if !ok {
		return r, 0, 0, fmt.Errorf("store: series step %v is not one of the kept resolutions", p.Step)
	}
	step := int64(r.Step / time.Second)
	first = SeriesBucketStart(p.From, r.Step)
	if time.Unix(first, 0).Before(p.From) {
		first += step // the bucket holding From starts before it
	}
	// the oldest bucket not expired at Now: start + Keep > Now
	// (the bucket holding Now-Keep starts at or before it: expired).
	oldest := SeriesBucketStart(p.Now.Add(-r.Keep), r.Step) + step
	first = max(first, oldest)
	// at most Keep/Step buckets, so a read costs no more than a whole
	// resolution whatever range it asks for
	last = min(SeriesBucketStart(p.To, r.Step), first+int64(r.Keep/r.Step-1)*step)
	return r, first, last, nil
}
