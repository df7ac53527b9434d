package history

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// fixture is a history over a real memstore, inside a synctest bubble so
// that sample times and intervals are exact.
type fixture struct {
	t  *testing.T
	st *memstore.Store
	h  *History
}

func newFixture(t *testing.T, cfg Config) *fixture {
	st := memstore.New()
	t.Cleanup(func() { _ = st.Close() })
	cfg.Topics = st.Topics
	cfg.Store = st
	return &fixture{t: t, st: st, h: New(cfg)}
}

// put stores a delayed job of topic (due in an hour) and returns its id.
func (f *fixture) put(topic, id string) {
	f.t.Helper()
	now := time.Now()
	j := &delayq.Job{ID: id, Topic: topic, Body: []byte("x"), Priority: delayq.DefaultPriority, TTR: time.Minute,
		State: delayq.StateDelayed, Due: now.Add(time.Hour), Created: now}
	if err := f.st.Put(context.Background(), []*delayq.Job{j}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) del(id string) {
	f.t.Helper()
	if _, err := f.st.Delete(context.Background(), store.DeleteParams{Ref: delayq.Ref{ID: id}, Force: true}); err != nil {
		f.t.Fatal(err)
	}
}

// sample advances the bubble's clock by d and takes a sample.
func (f *fixture) sample(d time.Duration) {
	f.t.Helper()
	time.Sleep(d)
	if err := f.h.Sample(context.Background()); err != nil {
		f.t.Fatalf("Sample() = %v", err)
	}
}

func delayedCounts(samples []Sample) []int {
	out := make([]int, len(samples))
	for i, s := range samples {
		out[i] = s.Delayed
	}
	return out
}

// TestRingKeepsTheSpan: a ring holds Span/Interval samples, oldest first,
// and drops the oldest when full.
func TestRingKeepsTheSpan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Interval: 10 * time.Second, Span: 30 * time.Second})
		if f.h.Size() != 3 {
			t.Fatalf("Size() = %d, want 30s/10s = 3", f.h.Size())
		}
		start := time.Now()
		for i := range 5 {
			f.put("t", fmt.Sprint("j", i)) // sample i sees i+1 delayed jobs
			f.sample(10 * time.Second)
		}
		got, sampled := f.h.Topic("t")
		if !sampled {
			t.Fatal("Topic(t) is not sampled")
		}
		if d := delayedCounts(got); fmt.Sprint(d) != "[3 4 5]" {
			t.Errorf("delayed counts of the kept samples = %v, want the last three, [3 4 5]", d)
		}
		for i, s := range got {
			if want := start.Add(time.Duration(30+10*i) * time.Second); !s.At.Equal(want) || s.Elapsed != 10*time.Second {
				t.Errorf("sample %d at %s after %s, want at %s after 10s", i, s.At.Sub(start), s.Elapsed, want.Sub(start))
			}
		}
	})
}

// TestIdleTopicIsDropped: a topic whose jobs are gone keeps zero samples
// (the chart falls to zero) until it has been idle for the whole span.
func TestIdleTopicIsDropped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Interval: time.Second, Span: 3 * time.Second})
		f.put("t", "a")
		f.sample(time.Second)
		f.del("a")
		for i := range 3 {
			f.sample(time.Second)
			got, sampled := f.h.Topic("t")
			if i < 2 && (!sampled || got[len(got)-1].Delayed != 0) {
				t.Fatalf("after %d idle samples: sampled %v, samples %+v; want the topic kept with a zero sample", i+1, sampled, got)
			}
		}
		if got, sampled := f.h.Topic("t"); sampled || len(got) != 0 {
			t.Errorf("after a span of idle samples: sampled %v with %d samples, want the topic dropped", sampled, len(got))
		}
		// Fires alone keep a topic: the timer made jobs ready that were
		// reserved at once.
		f.put("u", "b")
		f.sample(time.Second)
		f.del("b")
		for range 5 {
			f.h.Fired("u", []time.Duration{time.Millisecond})
			f.sample(time.Second)
		}
		if _, sampled := f.h.Topic("u"); !sampled {
			t.Error("a topic with fires in every interval was dropped")
		}
	})
}

// TestMaxTopics: beyond MaxTopics, topics are not sampled (first come, in
// name order), their fires are not kept, and one is admitted once a
// sampled topic is dropped.
func TestMaxTopics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Interval: time.Second, Span: 2 * time.Second, MaxTopics: 2})
		for _, topic := range []string{"c", "b", "a"} {
			f.put(topic, "job-"+topic)
		}
		f.sample(time.Second)
		f.h.Fired("c", []time.Duration{time.Millisecond}) // not sampled: not kept
		if n := f.h.Sampled(); n != 2 {
			t.Fatalf("Sampled() = %d, want MaxTopics = 2", n)
		}
		for topic, want := range map[string]bool{"a": true, "b": true, "c": false} {
			if _, sampled := f.h.Topic(topic); sampled != want {
				t.Errorf("Topic(%s) sampled = %v, want %v", topic, sampled, want)
			}
		}
		f.del("job-a")
		f.sample(time.Second)
		f.sample(time.Second) // a has been idle for the span: dropped
		if _, sampled := f.h.Topic("a"); sampled {
			t.Fatal("idle topic a is still sampled")
		}
		f.h.Fired("c", []time.Duration{2 * time.Millisecond}) // room now: c is admitted by its fire
		f.sample(time.Second)
		got, sampled := f.h.Topic("c")
		if !sampled || len(got) != 1 || got[0].Fires != 1 || got[0].Delayed != 1 {
			t.Errorf("Topic(c) after a was dropped = %+v, sampled %v; want one sample with 1 fire and 1 delayed job", got, sampled)
		}
	})
}

// TestFiresAndLateness: fires are counted per interval and per topic, with
// percentiles within a bucket (10%) above the true value, never above the
// exact maximum.
func TestFiresAndLateness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Interval: 10 * time.Second})
		f.put("t", "keep") // the topic has a job, so it stays listed
		var ds []time.Duration
		for i := 1; i <= 100; i++ {
			ds = append(ds, time.Duration(i)*time.Millisecond)
		}
		f.h.Fired("t", ds[:50])
		f.h.Fired("t", ds[50:])
		f.h.Fired("other", []time.Duration{3 * time.Millisecond})
		f.sample(10 * time.Second)
		f.sample(10 * time.Second)
		got, _ := f.h.Topic("t")
		if len(got) != 2 {
			t.Fatalf("Topic(t) = %d samples, want 2", len(got))
		}
		s := got[0]
		if s.Fires != 100 || s.FiresPerSecond() != 10 {
			t.Errorf("first sample: %d fires, %v/s; want 100 and 10/s", s.Fires, s.FiresPerSecond())
		}
		within := func(name string, got, truth time.Duration) {
			if got < truth || float64(got) > float64(truth)*1.1 {
				t.Errorf("%s = %s, want within 10%% above %s", name, got, truth)
			}
		}
		within("p50", s.Lateness.P50, 50*time.Millisecond)
		within("p90", s.Lateness.P90, 90*time.Millisecond)
		within("p99", s.Lateness.P99, 99*time.Millisecond)
		if s.Lateness.Max != 100*time.Millisecond || s.Lateness.P99 > s.Lateness.Max {
			t.Errorf("max = %s, p99 = %s; want max exactly 100ms and p99 no higher", s.Lateness.Max, s.Lateness.P99)
		}
		if got[1].Fires != 0 || got[1].Lateness != (Lateness{}) {
			t.Errorf("second sample = %+v, want no fires and no lateness: each sample covers its own interval", got[1])
		}
		other, sampled := f.h.Topic("other")
		want := Lateness{3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond, 3 * time.Millisecond}
		if !sampled || other[0].Fires != 1 || other[0].Lateness != want {
			t.Errorf("Topic(other) = %+v; want 1 fire, every percentile exactly 3ms (capped at the max)", other)
		}
	})
}

// TestLatenessBuckets: extreme latenesses land in the end buckets.
func TestLatenessBuckets(t *testing.T) {
	var a accumulator
	for _, d := range []time.Duration{-time.Second, 0, 50 * time.Microsecond} {
		a.add(d)
	}
	if l := a.lateness(); l.P99 != 50*time.Microsecond || l.Max != 50*time.Microsecond {
		t.Errorf("sub-bucket latenesses: %+v, want p99 and max 50µs", l)
	}
	a.reset()
	for range 10 {
		a.add(0)
	}
	a.add(3 * time.Millisecond)
	if l := a.lateness(); l.P50 != 0 || l.P90 != 0 || l.P99 != 3*time.Millisecond {
		t.Errorf("ten fires on time and one 3ms late: %+v, want p50 and p90 exactly 0, p99 3ms", l)
	}
	a.reset()
	a.add(1000 * time.Hour)
	if l := a.lateness(); l.P50 != 1000*time.Hour {
		t.Errorf("a lateness beyond the last bucket: p50 %s, want the exact 1000h", l.P50)
	}
	for i := 1; i < latBuckets; i++ {
		if bucketOf(upper(i)) > i || (i < latBuckets-1 && bucketOf(upper(i)+time.Microsecond) <= i) {
			t.Fatalf("bucket %d's upper edge %s falls in bucket %d", i, upper(i), bucketOf(upper(i)))
		}
	}
}

// TestRun samples every Interval until its context ends.
func TestRun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Interval: 10 * time.Second})
		f.put("t", "a")
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- f.h.Run(ctx) }()
		time.Sleep(35 * time.Second)
		synctest.Wait()
		got, _ := f.h.Topic("t")
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run() = %v after cancel, want nil", err)
		}
		if len(got) != 3 {
			t.Errorf("after 35s: %d samples, want 3 (at 10, 20 and 30 s)", len(got))
		}
	})
}

// TestLatenessP99Since: the alarms' figure is the highest p99 among the
// samples after since that had fires; none: false.
func TestLatenessP99Since(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{Interval: 10 * time.Second})
		f.put("t", "keep")
		start := time.Now()
		if _, ok := f.h.LatenessP99("t", start); ok {
			t.Error("LatenessP99 before any sample = ok, want none")
		}
		f.h.Fired("t", []time.Duration{2 * time.Second})
		f.sample(10 * time.Second) // at +10s: p99 2s
		f.h.Fired("t", []time.Duration{500 * time.Millisecond})
		f.sample(10 * time.Second) // at +20s: p99 0.5s
		f.sample(10 * time.Second) // at +30s: no fires
		if d, ok := f.h.LatenessP99("t", start); !ok || d < 2*time.Second || d > 2200*time.Millisecond {
			t.Errorf("LatenessP99(since start) = %s, %v; want about 2s", d, ok)
		}
		if d, ok := f.h.LatenessP99("t", start.Add(15*time.Second)); !ok || d < 500*time.Millisecond || d > 550*time.Millisecond {
			t.Errorf("LatenessP99(since +15s) = %s, %v; want about 0.5s", d, ok)
		}
		if _, ok := f.h.LatenessP99("t", start.Add(25*time.Second)); ok {
			t.Error("LatenessP99 over samples without fires = ok, want none")
		}
		if _, ok := f.h.LatenessP99("nosuch", start); ok {
			t.Error("LatenessP99 of an unknown topic = ok")
		}
	})
}

// TestReadFromStore: samples go into the store, and a new History over
// the same store (a restarted server) reads them: the series do not live
// in the sampler's memory. Finishes and failures are the change in the
// running counts between samples; a topic with only finishes is sampled.
func TestReadFromStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{})
		counts := map[string]Counts{}
		f.h.cfg.Counts = func() map[string]Counts { return maps.Clone(counts) }
		f.put("t", "a")
		f.h.Fired("t", []time.Duration{0, 5 * time.Millisecond})
		counts["t"] = Counts{Finishes: 3, Failures: 1}
		counts["quick"] = Counts{Finishes: 2} // no jobs left, but finishes
		f.sample(10 * time.Second)
		counts["t"] = Counts{Finishes: 4, Failures: 1}
		f.sample(10 * time.Second)
		f.sample(10 * time.Second) // nothing new

		again := New(Config{Topics: f.st.Topics, Store: f.st}) // a restart: empty memory, same store
		got, err := again.Read(context.Background(), "t", 0)
		if err != nil {
			t.Fatal(err)
		}
		if got.Step != 10*time.Second || got.Range != time.Hour || !got.Sampled || len(got.Samples) != 3 {
			t.Fatalf("Read(t) = %+v, want three 10 s samples of the last hour", got)
		}
		want := [][3]int{{2, 3, 1}, {0, 1, 0}, {0, 0, 0}} // fires, finishes, failures
		for i, smp := range got.Samples {
			if g := [3]int{smp.Fires, smp.Finishes, smp.Failures}; g != want[i] || smp.Delayed != 1 || smp.Elapsed != 10*time.Second {
				t.Errorf("sample %d = %+v, want fires/finishes/failures %v and 1 delayed", i, smp, want[i])
			}
		}
		if l := got.Samples[0].Lateness; l.P50 != 0 || l.Max != 5*time.Millisecond || l.P99 < 5*time.Millisecond {
			t.Errorf("lateness of the first sample = %+v, want p50 0 and max/p99 5ms", l)
		}
		quick, err := again.Read(context.Background(), "quick", 0)
		if err != nil || len(quick.Samples) != 3 || quick.Samples[0].Finishes != 2 {
			t.Errorf("Read(quick) = %+v, %v; want its finishes though it never had jobs at a sample", quick, err)
		}
		week, err := again.Read(context.Background(), "t", 7*24*time.Hour)
		if err != nil || week.Step != time.Minute || len(week.Samples) != 1 || week.Samples[0].Fires != 2 || week.Samples[0].Finishes != 4 {
			t.Errorf("Read(t, 7d) = %+v, %v; want one minute bucket with every sample's counts", week, err)
		}
		for _, bad := range []time.Duration{-time.Second, 7*24*time.Hour + time.Second} {
			if _, err := again.Read(context.Background(), "t", bad); !errors.Is(err, delayq.ErrInvalid) {
				t.Errorf("Read(t, %v) = %v, want an invalid-range error", bad, err)
			}
		}
	})
}

// TestRunAlignsToTheMarks: Run samples on the wall clock's 10 s
// marks, so each sample fills one store bucket, whenever it started.
func TestRunAlignsToTheMarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{})
		f.put("t", "a")
		time.Sleep(3 * time.Second) // start off the mark
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- f.h.Run(ctx) }()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		cancel()
		<-done
		got, _ := f.h.Topic("t")
		for _, s := range got {
			if s.At.Truncate(10*time.Second) != s.At {
				t.Errorf("sample at %s, want on a 10 s mark", s.At.Format(time.TimeOnly))
			}
		}
		series, err := f.h.Read(context.Background(), "t", 0)
		if err != nil || len(series.Samples) != 3 {
			t.Fatalf("Read = %+v, %v; want the three samples in three buckets", series, err)
		}
	})
}

// TestCountsStartOver: a topic whose counters were forgotten and began
// again (a new Gen) samples its new counts, not their difference from
// the old ones, which wrapped around below zero.
func TestCountsStartOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture(t, Config{})
		counts := map[string]Counts{}
		f.h.cfg.Counts = func() map[string]Counts { return maps.Clone(counts) }
		counts["t"] = Counts{Finishes: 5, Failures: 3, Gen: 1}
		f.sample(10 * time.Second)
		delete(counts, "t") // forgotten
		f.sample(10 * time.Second)
		counts["t"] = Counts{Finishes: 2, Failures: 1, Gen: 7} // counted again
		f.sample(10 * time.Second)
		counts["t"] = Counts{Finishes: 9, Failures: 4, Gen: 9} // forgotten and counted again between samples
		f.sample(10 * time.Second)
		got, _ := f.h.Topic("t")
		want := [][2]int{{5, 3}, {0, 0}, {2, 1}, {9, 4}}
		if len(got) != len(want) {
			t.Fatalf("Topic(t) has %d samples, want %d", len(got), len(want))
		}
		for i, smp := range got {
			if g := [2]int{smp.Finishes, smp.Failures}; g != want[i] {
				t.Errorf("sample %d finishes/failures = %v, want %v", i, g, want[i])
			}
		}
	})
}
