package diskstore

import (
	"crypto/rand"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// sstBytes is the total size of the sstables in dir.
func sstBytes(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".sst") {
			return nil // a table a compaction just removed
		}
		if info, err := d.Info(); err == nil {
			n += info.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestExpiryGivesDiskBack: once Tick removed expired retained jobs, the
// store flushes and compacts their records away on its own, so the
// sstables shrink to well under the jobs' bodies without any further
// call. (With reclaimAfter -1, the code before the reclaim, the
// sstables still held 22 MB of the 31 MB 10 s later.)
func TestExpiryGivesDiskBack(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	clock := &fakeClock{now: t0}
	s := openAt(t, dir, Options{MinFree: -1, MemTableSize: 4 << 20,
		Retention:    store.Retention{For: time.Second, Bodies: true, Now: clock.Now},
		reclaimAfter: 1, reclaimEvery: time.Nanosecond})
	defer func() { _ = s.Close() }()

	const jobs, size = 300, 60 << 10
	var dels []store.DeleteParams
	for i := 0; i < jobs; i += 100 {
		var batch []*delayq.Job
		for k := i; k < i+100; k++ {
			body := make([]byte, size)
			_, _ = rand.Read(body) // incompressible, as Pebble sees most bodies
			id := fmt.Sprintf("job-%d", k)
			batch = append(batch, &delayq.Job{ID: id, Topic: "t", Body: body, State: delayq.StateReady, TTR: time.Hour, Due: t0, Created: t0})
			dels = append(dels, store.DeleteParams{Ref: delayq.Ref{ID: id}, Force: true, Now: t0})
		}
		mustPut(t, s, batch...)
	}
	for i := 0; i < jobs; i += 100 {
		_, errs, err := s.DeleteBatch(ctx, dels[i:i+100])
		if err != nil {
			t.Fatal(err)
		}
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	// The jobs' bodies, put and retained, are in sstables now.
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	before := sstBytes(t, dir)
	if before < jobs*size {
		t.Fatalf("sstables hold %d bytes before the expiry, want at least the bodies' %d", before, jobs*size)
	}

	end := t0.Add(2 * time.Second)
	clock.set(end)
	res, err := s.Tick(ctx, store.TickParams{Now: end, Max: 1000})
	if err != nil || res.Expired != jobs {
		t.Fatalf("Tick = %+v, %v; want %d expired", res, err, jobs)
	}
	const bound = jobs * size / 10
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := sstBytes(t, dir)
		if n < bound {
			t.Logf("sstables: %d bytes before the expiry, %d after", before, n)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("sstables hold %d bytes 10 s after %d jobs of %d bytes expired (%d before); want under %d", n, jobs, size, before, bound)
		}
		time.Sleep(20 * time.Millisecond) // polling the directory, bounded by deadline
	}
}

// TestReclaimWaitsForAQuarterOfTheLive: a reclaim rewrites the live
// records too, so a few expired jobs beside many live ones start none;
// once the expired jobs since the last reclaim reach a quarter of the
// live ones, one starts.
func TestReclaimWaitsForAQuarterOfTheLive(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: t0}
	s := openAt(t, t.TempDir(), Options{MinFree: -1,
		Retention:    store.Retention{For: time.Second, Now: clock.Now},
		reclaimAfter: 1, reclaimEvery: time.Nanosecond})
	defer func() { _ = s.Close() }()
	job := func(id string) *delayq.Job {
		return &delayq.Job{ID: id, Topic: "t", Body: []byte("x"), State: delayq.StateDelayed, TTR: time.Hour, Due: t0.Add(time.Hour), Created: t0}
	}
	for i := 0; i < 100; i++ {
		mustPut(t, s, job(fmt.Sprintf("live-%d", i)))
	}
	started := func() bool {
		s.reclaim.mu.Lock()
		defer s.reclaim.mu.Unlock()
		return !s.reclaim.last.IsZero()
	}
	expire := func(prefix string, n int, at time.Time) {
		t.Helper()
		for i := 0; i < n; i++ {
			id := fmt.Sprintf("%s-%d", prefix, i)
			mustPut(t, s, job(id))
			if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id}, Force: true, Now: clock.Now()}); err != nil {
				t.Fatal(err)
			}
		}
		clock.set(at)
		res, err := s.Tick(ctx, store.TickParams{Now: at, Max: 1000})
		if err != nil || res.Expired != n {
			t.Fatalf("Tick = %+v, %v; want %d expired", res, err, n)
		}
	}
	expire("few", 10, t0.Add(2*time.Second))
	if started() {
		t.Fatal("10 expired jobs beside 100 live ones started a reclaim")
	}
	expire("more", 20, t0.Add(4*time.Second))
	if !started() {
		t.Fatal("30 expired jobs beside 100 live ones started no reclaim")
	}
}
