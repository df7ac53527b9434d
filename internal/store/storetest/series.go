package storetest

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// testSeries pins store.SeriesStore: the merge (counters and lateness
// histograms add, the maximum keeps the largest, gauges take the last
// write) into both resolutions at once, two writers' samples landing in
// the same buckets, read ranges, expiry by bucket time, refusal of bad
// samples, copies, and durability across a reopen.
func testSeries(t *testing.T, f Factory) {
	const (
		s10 = 10 * time.Second
		s60 = time.Minute
	)
	// base is 05:06:07.890: its 10 s bucket starts at 05:06:00, as does
	// its minute.
	b0 := base.Truncate(time.Minute)
	read := func(h *harness, topic string, step time.Duration, from, to, now time.Time) []store.SeriesBucket {
		h.t.Helper()
		got, err := h.s.ReadSeries(h.ctx, store.SeriesReadParams{Topic: topic, Step: step, From: from, To: to, Now: now})
		if err != nil {
			h.t.Fatalf("ReadSeries(%s, %v, %v..%v) = %v", topic, step, from, to, err)
		}
		if got == nil {
			h.t.Fatalf("ReadSeries(%s) = nil, want an empty slice", topic)
		}
		return got
	}
	add := func(h *harness, at time.Time, samples ...store.SeriesSample) {
		h.t.Helper()
		if err := h.s.AddSeries(h.ctx, at, samples); err != nil {
			h.t.Fatalf("AddSeries(%v) = %v", at, err)
		}
	}
	day, week := 24*time.Hour, 7*24*time.Hour

	t.Run("MergeBothResolutions", func(t *testing.T) {
		h := open(t, f)
		// Two writers (instances sharing the store) sample topic t within
		// the same 10 s: their counts add, their gauges agree (they read
		// the same store), the later write's gauges stay.
		add(h, base, store.SeriesSample{Topic: "t", Ready: 5, Delayed: 7, Reserved: 1, Buried: 2,
			Fires: 3, Finishes: 4, Failures: 1, Lateness: map[int]int{0: 2, 40: 1}, LatenessMax: 12 * time.Millisecond},
			store.SeriesSample{Topic: "u", Ready: 1, Finishes: 9})
		add(h, base.Add(time.Second), store.SeriesSample{Topic: "t", Ready: 6, Delayed: 7, Reserved: 0, Buried: 2,
			Fires: 2, Failures: 2, Lateness: map[int]int{40: 1, 41: 1}, LatenessMax: 9 * time.Millisecond})
		// the next 10 s bucket, same minute
		add(h, base.Add(5*time.Second), store.SeriesSample{Topic: "t", Ready: 1, Delayed: 3, Fires: 1, Finishes: 1,
			Lateness: map[int]int{200: 1}, LatenessMax: time.Hour})
		now := base.Add(10 * time.Second)
		first := store.SeriesBucket{At: b0, Ready: 6, Delayed: 7, Reserved: 0, Buried: 2, Fires: 5, Finishes: 4, Failures: 3,
			Lateness: map[int]int{0: 2, 40: 2, 41: 1}, LatenessMax: 12 * time.Millisecond}
		second := store.SeriesBucket{At: b0.Add(s10), Ready: 1, Delayed: 3, Fires: 1, Finishes: 1,
			Lateness: map[int]int{200: 1}, LatenessMax: time.Hour}
		check(t, "ReadSeries(t, 10s)", read(h, "t", s10, base.Add(-time.Hour), now, now), []store.SeriesBucket{first, second})
		check(t, "ReadSeries(t, 1m)", read(h, "t", s60, base.Add(-time.Hour), now, now), []store.SeriesBucket{{
			At: b0, Ready: 1, Delayed: 3, Buried: 0, Fires: 6, Finishes: 5, Failures: 3,
			Lateness: map[int]int{0: 2, 40: 2, 41: 1, 200: 1}, LatenessMax: time.Hour}})
		check(t, "ReadSeries(u, 10s): topics apart", read(h, "u", s10, b0, now, now),
			[]store.SeriesBucket{{At: b0, Ready: 1, Finishes: 9}})
		check(t, "ReadSeries(unknown topic)", read(h, "nope", s10, b0, now, now), []store.SeriesBucket{})
		// A returned bucket is a copy.
		got := read(h, "t", s10, b0, b0, now)
		got[0].Lateness[0] = 1000
		check(t, "ReadSeries(t) after changing a returned bucket", read(h, "t", s10, b0, b0, now), []store.SeriesBucket{first})
	})

	t.Run("Ranges", func(t *testing.T) {
		h := open(t, f)
		for i := range 6 { // six 10 s buckets, 05:06:00 .. 05:06:50
			add(h, b0.Add(time.Duration(i)*s10), store.SeriesSample{Topic: "t", Fires: i + 1})
		}
		now := b0.Add(time.Minute)
		starts := func(bs []store.SeriesBucket) []int {
			out := []int{}
			for _, b := range bs {
				out = append(out, b.Fires)
			}
			return out
		}
		check(t, "[From, To] inclusive", starts(read(h, "t", s10, b0.Add(s10), b0.Add(3*s10), now)), []int{2, 3, 4})
		check(t, "From inside a bucket leaves it out; To inside one keeps it", starts(read(h, "t", s10, b0.Add(s10+time.Millisecond), b0.Add(3*s10+time.Second), now)), []int{3, 4})
		check(t, "To before From", starts(read(h, "t", s10, b0.Add(3*s10), b0.Add(s10), now)), []int{})
		check(t, "everything", starts(read(h, "t", s10, b0.Add(-week), b0.Add(week), now)), []int{1, 2, 3, 4, 5, 6})
		if _, err := h.s.ReadSeries(h.ctx, store.SeriesReadParams{Topic: "t", Step: 30 * time.Second, From: b0, To: now, Now: now}); err == nil {
			t.Fatal("ReadSeries(step 30s) = nil error, want an error: not a kept resolution")
		}
	})

	t.Run("Expiry", func(t *testing.T) {
		h := open(t, f)
		add(h, base, store.SeriesSample{Topic: "t", Fires: 1})
		all := func(step time.Duration, now time.Time) []store.SeriesBucket {
			return read(h, "t", step, base.Add(-week), now, now)
		}
		// The 10 s bucket starting at b0 lives until b0+24h; the minute
		// one until b0+7d.
		check(t, "10s bucket just before its day ends", len(all(s10, b0.Add(day-time.Millisecond))), 1)
		check(t, "10s bucket when its day ends", all(s10, b0.Add(day)), []store.SeriesBucket{})
		check(t, "1m bucket after a day", len(all(s60, b0.Add(day))), 1)
		check(t, "1m bucket just before its week ends", len(all(s60, b0.Add(week-time.Millisecond))), 1)
		check(t, "1m bucket when its week ends", all(s60, b0.Add(week)), []store.SeriesBucket{})
		// The same 10 s slot a whole day later (a ring store reuses it).
		add(h, base.Add(day), store.SeriesSample{Topic: "u", Fires: 3})
		add(h, base.Add(2*day), store.SeriesSample{Topic: "u", Fires: 4})
		check(t, "10s bucket a day after another in its slot", read(h, "u", s10, base, base.Add(2*day), base.Add(2*day)),
			[]store.SeriesBucket{{At: b0.Add(2 * day), Fires: 4}})
		check(t, "1m buckets a day apart", len(read(h, "u", s60, base, base.Add(2*day), base.Add(2*day))), 2)
		// Writing on after a week: the old buckets stay gone, the new ones
		// are there (a store dropping old buckets by itself must not drop
		// live ones).
		later := base.Add(week + 3*day)
		add(h, later, store.SeriesSample{Topic: "t", Fires: 2})
		check(t, "10s after a week", all(s10, later), []store.SeriesBucket{{At: b0.Add(week + 3*day), Fires: 2}})
		check(t, "1m after a week", all(s60, later), []store.SeriesBucket{{At: b0.Add(week + 3*day), Fires: 2}})
		check(t, "u's buckets after a week", read(h, "u", s60, base, later, later), []store.SeriesBucket{})
	})

	t.Run("BadSample", func(t *testing.T) {
		h := open(t, f)
		good := store.SeriesSample{Topic: "t", Fires: 1}
		for name, bad := range map[string]store.SeriesSample{
			"no topic":          {Fires: 1},
			"negative count":    {Topic: "u", Finishes: -1},
			"negative gauge":    {Topic: "u", Ready: -1},
			"negative max":      {Topic: "u", LatenessMax: -time.Second},
			"lateness index":    {Topic: "u", Lateness: map[int]int{store.SeriesLatenessBuckets: 1}},
			"negative index":    {Topic: "u", Lateness: map[int]int{-1: 1}},
			"negative lateness": {Topic: "u", Lateness: map[int]int{3: -1}},
		} {
			if err := h.s.AddSeries(h.ctx, base, []store.SeriesSample{good, bad}); err == nil {
				t.Errorf("AddSeries(%s) = nil, want an error", name)
			}
		}
		check(t, "ReadSeries(t) after refused writes: nothing written", read(h, "t", s10, b0, base, base), []store.SeriesBucket{})
	})

	t.Run("Persistence", func(t *testing.T) {
		if f.Reopen == nil {
			t.Skip("Factory.Reopen is nil: the store is not durable")
		}
		h := open(t, f)
		smp := store.SeriesSample{Topic: "t", Ready: 2, Fires: 3, Finishes: 1, Failures: 1, Lateness: map[int]int{7: 3}, LatenessMax: time.Millisecond}
		add(h, base, smp)
		want := read(h, "t", s60, b0, base, base)
		h.reopen()
		check(t, "ReadSeries(1m) after reopen", read(h, "t", s60, b0, base, base), want)
		add(h, base, smp) // and merging goes on where it was
		got := read(h, "t", s10, b0, base, base)
		if len(got) != 1 || got[0].Fires != 6 || got[0].Lateness[7] != 6 {
			t.Fatalf("ReadSeries(10s) after a reopen and another write = %+v, want the two merged", got)
		}
	})
}
