package diskstore

import (
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"go.uber.org/goleak"
)

// TestOpenRunsNoCompaction: a store that crashed with compaction debt and
// an unflushed WAL opens without running a compaction (pebble.Open would
// wait for it to end), and the compaction runs right after.
func TestOpenRunsNoCompaction(t *testing.T) {
	dir := t.TempDir()
	writeCompactionDebt(t, dir)

	var (
		mu                                      sync.Mutex
		opened                                  bool
		flushesInOpen, compactionsInOpen, after int
		began                                   = make(chan struct{}, 64)
	)
	events := &pebble.EventListener{
		FlushEnd: func(pebble.FlushInfo) {
			mu.Lock()
			defer mu.Unlock()
			if !opened {
				flushesInOpen++
			}
		},
		CompactionBegin: func(pebble.CompactionInfo) {
			mu.Lock()
			defer mu.Unlock()
			if opened {
				after++
			} else {
				compactionsInOpen++
			}
			began <- struct{}{}
		},
	}
	opts := Options{pebbleEvents: events, pebbleOpened: func() {
		mu.Lock()
		defer mu.Unlock()
		opened = true
	}}
	db := openLocked(t, dir, opts)
	defer db.Close()
	mu.Lock()
	if flushesInOpen == 0 {
		t.Error("set-up: Open flushed nothing; the WAL was not replayed")
	}
	if compactionsInOpen != 0 {
		t.Errorf("%d compactions began inside pebble.Open, want 0 (Open waits for them to end)", compactionsInOpen)
	}
	mu.Unlock()
	select {
	case <-began:
	case <-time.After(time.Minute):
		t.Fatal("no compaction began within a minute of Open: the gate never opened")
	}
	mu.Lock()
	defer mu.Unlock()
	if after == 0 {
		t.Error("the compaction after Open was not counted")
	}
}

// TestFailedOpenStopsTheScheduler: when pebble.Open fails after it
// registered the store's compaction scheduler (here: it cannot write its
// OPTIONS file), Open returns the error and leaves no goroutine of the
// scheduler behind, although Pebble never unregisters it.
func TestFailedOpenStopsTheScheduler(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(dir, Options{MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	before := goleak.IgnoreCurrent()
	registered := false
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if op.Kind == errorfs.OpCreate && strings.Contains(filepath.Base(op.Path), ".dbtmp") {
			registered = true // the OPTIONS file is written after Register
			return errorfs.ErrInjected
		}
		return nil
	}))
	if s, err := Open(dir, Options{MinFree: -1, fs: fs}); err == nil {
		_ = s.Close()
		t.Fatal("Open succeeded without its OPTIONS file")
	}
	if !registered {
		t.Fatal("set-up: Pebble never tried to write its OPTIONS file")
	}
	goleak.VerifyNone(t, before)
}

// writeCompactionDebt leaves in dir what a store that crashed with
// compaction debt leaves: overlapping L0 tables, more than Pebble's L0
// compaction threshold, written with compactions off; then a batch in
// the WAL only, as a kill -9 leaves it. Opening it flushes the WAL
// inside pebble.Open and compacts L0 after.
func writeCompactionDebt(t *testing.T, dir string) {
	t.Helper()
	raw := Options{MemTableSize: 4 << 20}
	raw.setDefaults()
	po := pebbleOptions(raw, nil)
	po.DisableAutomaticCompactions = true
	db, err := pebble.Open(dir, po)
	if err != nil {
		t.Fatal(err)
	}
	value := make([]byte, 100)
	for table := range 8 {
		b := db.NewBatch()
		for i := range 2000 {
			if err := b.Set(fmt.Appendf(nil, "J%06d", i*8+table), value, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Commit(pebble.Sync); err != nil {
			t.Fatal(err)
		}
		if table < 7 {
			if err := db.Flush(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := db.Metrics().Levels[0].TablesCount; n < 7 {
		t.Fatalf("set-up: %d L0 tables, want 7", n)
	}
	if err := db.Close(); err != nil { // leaves the last batch in the WAL
		t.Fatal(err)
	}
}

// openLocked opens dir's Pebble as the store does (openPebble, writable),
// holding the directory lock until the test ends.
func openLocked(t *testing.T, dir string, opts Options) *pebble.DB {
	t.Helper()
	opts.setDefaults()
	lock, err := lockDir(vfs.Default, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	db, _, err := openPebble(dir, opts, lock, false)
	if err != nil {
		t.Fatal(err)
	}
	return db
}
