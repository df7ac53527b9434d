package diskstore

import (
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/internal/store"
)

// seriesKeys counts the Z keys of one resolution and their bytes (key and
// value).
func seriesKeys(t *testing.T, s *Store, r store.SeriesResolution) (n, bytes int) {
	t.Helper()
	lo := seriesEpochPrefix(r, -1<<62)
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: seriesEpochPrefix(r, 1<<62)})
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	for it.First(); it.Valid(); it.Next() {
		n++
		bytes += len(it.Key()) + len(it.Value())
	}
	return n, bytes
}

// Expired buckets leave the disk by themselves: after 26 hours of samples
// every 10 s, at most a day and one epoch of 10-second keys are left (not
// 26 hours of them), and writing a week later leaves no old key of
// either resolution. The deletes are whole epochs, one range delete each.
func TestSeriesExpiredKeysAreDeleted(t *testing.T) {
	s := openAt(t, t.TempDir(), Options{})
	defer s.Close()
	ctx := t.Context()
	r10, r60 := store.SeriesResolutions[0], store.SeriesResolutions[1]
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := start
	for ; at.Before(start.Add(26 * time.Hour)); at = at.Add(10 * time.Second) {
		if err := s.AddSeries(ctx, at, []store.SeriesSample{
			{Topic: "a", Ready: 100, Fires: 20, Finishes: 20, Failures: 1, Lateness: map[int]int{0: 15, 60: 4, 70: 1}, LatenessMax: 5 * time.Millisecond},
			{Topic: "b", Ready: 3},
		}); err != nil {
			t.Fatal(err)
		}
	}
	n10, bytes10 := seriesKeys(t, s, r10)
	n60, bytes60 := seriesKeys(t, s, r60)
	if max10 := 2 * int((r10.Keep+r10.Keep/seriesEpochs)/r10.Step); n10 > max10 || n10 < 2*int(r10.Keep/r10.Step) {
		t.Fatalf("10s keys after 26 h = %d, want between a day's (%d) and a day and an epoch's (%d)", n10, 2*int(r10.Keep/r10.Step), max10)
	}
	if want := 2 * 26 * 60; n60 != want {
		t.Fatalf("1m keys after 26 h = %d, want %d (all of them: a week is kept)", n60, want)
	}
	t.Logf("on disk, before compression: 10s %d keys %d bytes (%.0f B/key), 1m %d keys %d bytes (%.0f B/key)",
		n10, bytes10, float64(bytes10)/float64(n10), n60, bytes60, float64(bytes60)/float64(n60))
	later := at.Add(8 * 24 * time.Hour)
	if err := s.AddSeries(ctx, later, []store.SeriesSample{{Topic: "a", Fires: 1}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := seriesKeys(t, s, r10); n != 1 {
		t.Fatalf("10s keys a week later = %d, want 1 (the new one)", n)
	}
	if n, _ := seriesKeys(t, s, r60); n != 1 {
		t.Fatalf("1m keys a week later = %d, want 1 (the new one)", n)
	}
}

// FuzzDecodeBucket: any bytes decode to a bucket or an error, never a
// panic, and what encodeBucket writes decodes to the same bucket.
func FuzzDecodeBucket(f *testing.F) {
	f.Add(encodeBucket(&store.SeriesBucket{Ready: 3, Fires: 2, Lateness: map[int]int{0: 1, 255: 7}, LatenessMax: time.Second}))
	f.Add([]byte{seriesFormat})
	f.Add([]byte{seriesFormat, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, v []byte) {
		b, err := decodeBucket(0, v)
		if err != nil {
			return
		}
		again, err := decodeBucket(0, encodeBucket(&b))
		if err != nil {
			t.Fatalf("re-encoded bucket %+v does not decode: %v", b, err)
		}
		if again.Ready != b.Ready || again.Fires != b.Fires || again.LatenessMax != b.LatenessMax || len(again.Lateness) > len(b.Lateness) {
			t.Fatalf("round trip changed %+v into %+v", b, again)
		}
	})
}
