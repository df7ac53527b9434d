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
// its one-minute key stays until its week ends (for the last bucket its
// hash holds). Nothing scans for them.
func TestSeriesKeysExpireByThemselves(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{Prefix: "t" + nonce()})
	defer s.Close()
	ctx := t.Context()
	at := time.Now().Add(-25 * time.Hour)
	if err := s.AddSeries(ctx, at, []store.SeriesSample{{Topic: "t", Fires: 1}}); err != nil {
		t.Fatal(err)
	}
	for _, r := range store.SeriesResolutions {
		start := store.SeriesBucketStart(at, r.Step)
		group, _ := seriesGroupStart(r, start)
		ms, err := s.c.Do(ctx, s.c.B().Pttl().Key(s.k.series("t", r.Step, group)).Build()).AsInt64()
		if err != nil {
			t.Fatal(err)
		}
		left := time.Duration(ms) * time.Millisecond
		lo := time.Until(time.Unix(start, 0).Add(r.Keep)) // the bucket's own end
		hi := lo + seriesGroup*r.Step                     // its group's last bucket's end
		switch {
		case r.Keep < 25*time.Hour:
			if ms != -2 {
				t.Errorf("step %v: PTTL = %d, want -2 (the key is gone: its buckets expired)", r.Step, ms)
			}
		case ms < 0 || left < lo-time.Minute || left > hi+time.Minute:
			t.Errorf("step %v: PTTL = %v, want between %v and %v (its bucket's end and its group's)", r.Step, left, lo, hi)
		}
	}
}

// A group hash holds six buckets; each reads back as its own bucket,
// and a read range cuts inside a group.
func TestSeriesGroupsHoldSixBuckets(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{Prefix: "t" + nonce()})
	defer s.Close()
	ctx := t.Context()
	r := store.SeriesResolutions[0]
	g0 := time.Unix(store.SeriesBucketStart(time.Now(), time.Minute), 0)
	for i := range 12 { // two groups
		if err := s.AddSeries(ctx, g0.Add(time.Duration(i)*r.Step), []store.SeriesSample{{Topic: "t", Ready: i, Fires: i + 1}}); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.c.Do(ctx, s.c.B().Exists().Key(s.k.series("t", r.Step, g0.Unix()), s.k.series("t", r.Step, g0.Unix()+60)).Build()).AsInt64()
	if err != nil || n != 2 {
		t.Fatalf("EXISTS of the two group keys = %d, %v; want 2 (twelve buckets in two hashes)", n, err)
	}
	got, err := s.ReadSeries(ctx, store.SeriesReadParams{Topic: "t", Step: r.Step, From: g0.Add(4 * r.Step), To: g0.Add(7 * r.Step), Now: g0.Add(time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 4 || got[0].Fires != 5 || got[3].Fires != 8 || got[3].Ready != 7 || !got[0].At.Equal(g0.Add(4*r.Step)) {
		t.Fatalf("ReadSeries(buckets 4..7) = %+v, want four buckets across the two groups", got)
	}
}

// FuzzDecodeSeriesGroup: any hash decodes to buckets or an error, never
// a panic, and every bucket lies in the group.
func FuzzDecodeSeriesGroup(f *testing.F) {
	f.Add("0g", "1,2,3,4", "5l7", "9")
	f.Add("9g", "1,2", "x", "")
	f.Add("0l", "3", "0m", "-1")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		bs, err := decodeSeriesGroup(600, 10, map[string]string{k1: v1, k2: v2})
		if err != nil {
			return
		}
		for _, b := range bs {
			if s := b.At.Unix(); s < 600 || s >= 600+seriesGroup*10 || b.Ready < 0 || b.Fires < 0 {
				t.Fatalf("bucket %+v out of its group or negative", b)
			}
		}
	})
}
