package diskstore

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/delayq/delayq"
)

// walSyncCounter counts the real syncs of WAL files that reach the
// filesystem, below the fsync window's deferral.
func walSyncCounter() (vfs.FS, *atomic.Int64) {
	var n atomic.Int64
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			n.Add(1)
		}
		return nil
	}))
	return fs, &n
}

// putOne puts a ready job named id and fails the test on error.
func putOne(t *testing.T, s *Store, id string) {
	t.Helper()
	if err := s.Put(t.Context(), []*delayq.Job{crashJob(id, false)}); err != nil {
		t.Fatalf("Put(%s) = %v, want nil", id, err)
	}
}

// With --fsync always each sequential transition waits for a sync of its
// own; with a window the answers come without any, and the window's loop
// makes them.
func TestFsyncPerTransition(t *testing.T) {
	const n = 20
	t.Run("always", func(t *testing.T) {
		fs, syncs := walSyncCounter()
		s := openAt(t, t.TempDir(), Options{fs: fs})
		defer s.Close()
		before := syncs.Load()
		for i := range n {
			putOne(t, s, fmt.Sprintf("j%d", i))
		}
		if got := syncs.Load() - before; got < n {
			t.Errorf("%d sequential puts made %d WAL syncs, want at least one each", n, got)
		}
	})
	t.Run("window", func(t *testing.T) {
		fs, syncs := walSyncCounter()
		// A window longer than the test: no background sync can run
		// during the puts, so any sync counted came from a put.
		s := openAt(t, t.TempDir(), Options{fs: fs, SyncEvery: time.Hour})
		before := syncs.Load()
		for i := range n {
			putOne(t, s, fmt.Sprintf("j%d", i))
		}
		if got := syncs.Load() - before; got != 0 {
			t.Errorf("%d puts in a 1h window made %d WAL syncs, want 0 (answered once written)", n, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if syncs.Load() == before {
			t.Error("Close made no WAL sync: the window's writes were never made durable")
		}
		// Everything acknowledged is there after the close.
		s = openAt(t, s.dir, Options{})
		defer s.Close()
		for i := range n {
			if _, err := s.Get(t.Context(), delayq.Ref{ID: fmt.Sprintf("j%d", i)}); err != nil {
				t.Errorf("Get(j%d) after reopen = %v", i, err)
			}
		}
	})
	t.Run("loop syncs within the window", func(t *testing.T) {
		fs, syncs := walSyncCounter()
		s := openAt(t, t.TempDir(), Options{fs: fs, SyncEvery: 5 * time.Millisecond})
		defer s.Close()
		before := syncs.Load()
		putOne(t, s, "j")
		// Wait on the observable effect, the sync, with a generous bound
		// that only a broken loop reaches.
		deadline := time.Now().Add(10 * time.Second)
		for syncs.Load() == before {
			if time.Now().After(deadline) {
				t.Fatal("no background WAL sync 10 s after a put with a 5 ms window")
			}
			time.Sleep(time.Millisecond)
		}
	})
}

// Group commit: many concurrent transitions share syncs. With 64 puts
// waiting at once, fewer syncs than puts prove that groups formed.
func TestGroupCommitSharesSyncs(t *testing.T) {
	fs, syncs := walSyncCounter()
	s := openAt(t, t.TempDir(), Options{fs: fs})
	defer s.Close()
	const n = 64
	before := syncs.Load()
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			putOne(t, s, fmt.Sprintf("g%d", i))
		})
	}
	close(start)
	wg.Wait()
	got := syncs.Load() - before
	if got >= n {
		t.Errorf("%d concurrent puts made %d WAL syncs, want fewer (group commit)", n, got)
	}
	t.Logf("%d concurrent puts, %d WAL syncs", n, got)
}

// A background sync that fails stops the store, as a failed synchronous
// sync does: data acknowledged in the window may never reach the disk.
func TestFsyncWindowSyncFailureFailsStore(t *testing.T) {
	var fail atomic.Bool
	fs := failingWALSyncs(&fail)
	s := openAt(t, t.TempDir(), Options{fs: fs, SyncEvery: 2 * time.Millisecond})
	defer func() { _ = s.Close() }()
	putOne(t, s, "before")
	fail.Store(true)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		err := s.Put(t.Context(), []*delayq.Job{crashJob(fmt.Sprintf("after%d", i), false)})
		if err != nil {
			if !strings.Contains(err.Error(), "injected") {
				t.Errorf("Put after a failed background sync = %v, want the sync's error", err)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("puts still succeed 10 s after background syncs began to fail")
		}
		time.Sleep(time.Millisecond)
	}
}
