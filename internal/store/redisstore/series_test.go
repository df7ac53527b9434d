package redisstore

import (
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// Two instances of one deployment write their own counts into the same
// buckets: each reads the sum, and the gauges both wrote (read from the
// shared store, so equal) once.
func TestSeriesTwoInstancesShareBuckets(t *testing.T) {
	for _, env := range []string{"DELAYQ_TEST_REDIS", "DELAYQ_TEST_REDIS_CLUSTER"} {
		t.Run(env, func(t *testing.T) {
			stores := group(t, redisAddrs(t, env), 2, Options{Buckets: 4})
			ctx := t.Context()
			now := time.Now()
			if err := stores[0].AddSeries(ctx, now, []store.SeriesSample{{Topic: "t", Ready: 3, Fires: 2, Finishes: 5, Failures: 1,
				Lateness: map[int]int{3: 2}, LatenessMax: 2 * time.Millisecond}}); err != nil {
				t.Fatal(err)
			}
			if err := stores[1].AddSeries(ctx, now, []store.SeriesSample{{Topic: "t", Ready: 3, Fires: 1, Finishes: 4, Failures: 2,
				Lateness: map[int]int{3: 1, 9: 1}, LatenessMax: 7 * time.Millisecond}}); err != nil {
				t.Fatal(err)
			}
			for i, s := range stores {
				for _, r := range store.SeriesResolutions {
					got, err := s.ReadSeries(ctx, store.SeriesReadParams{Topic: "t", Step: r.Step, From: now.Add(-r.Step), To: now, Now: now})
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != 1 {
						t.Fatalf("instance %d, step %v: %d buckets, want 1: %+v", i, r.Step, len(got), got)
					}
					b := got[0]
					if b.Ready != 3 || b.Fires != 3 || b.Finishes != 9 || b.Failures != 3 || b.Lateness[3] != 3 || b.Lateness[9] != 1 || b.LatenessMax != 7*time.Millisecond {
						t.Fatalf("instance %d, step %v: bucket %+v, want both instances' counts summed", i, r.Step, b)
					}
				}
			}
		})
	}
}

// Buckets expire by themselves, by their keys' PEXPIREAT: a sample
// written 25 hours ago has no 10-second key left (its day is over) while
// its one-minute key stays until its week ends. Nothing scans for them.
func TestSeriesKeysExpireByThemselves(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{Prefix: "t" + nonce()})
	defer s.Close()
	ctx := t.Context()
	at := time.Now().Add(-25 * time.Hour)
	if err := s.AddSeries(ctx, at, []store.SeriesSample{{Topic: "t", Fires: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range store.SeriesResolutions {
		key := s.k.series("t", r.Step, store.SeriesBucketStart(at, r.Step))
		ms, err := s.c.Do(ctx, s.c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		left := time.Duration(ms) * time.Millisecond
		want := time.Unix(store.SeriesBucketStart(at, r.Step), 0).Add(r.Keep)
		switch {
		case r.Keep < 25*time.Hour:
			if ms != -2 {
				t.Errorf("step %v: PTTL = %d, want -2 (the key is gone: its bucket expired)", r.Step, ms)
			}
		case ms < 0 || time.Until(want)-left > time.Minute || left-time.Until(want) > time.Minute:
			t.Errorf("step %v: PTTL = %v, want about %v (until the bucket's start + %v)", r.Step, left, time.Until(want), r.Keep)
		}
	}
}
