package diskstore

import (
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/storetest"
)

// openAt opens the store in dir and fails the test on error.
func openAt(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatalf("Open(%s) = %v, want nil", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	t.Run("Default", func(t *testing.T) { runSuite(t, Options{}) })
	// Chunks of two due-index entries force every path of the near-future
	// heap (loads, trims, disk-only deletes and updates) in every test.
	t.Run("TinyChunks", func(t *testing.T) { runSuite(t, Options{nearChunk: 2}) })
	// Every record read from Pebble, and a budget of about three jobs, so
	// hot and spilled jobs mix in every test.
	t.Run("NoHot", func(t *testing.T) { runSuite(t, Options{HotSize: -1}) })
	t.Run("TinyHot", func(t *testing.T) { runSuite(t, Options{HotSize: 3 * 400, nearChunk: 2}) })
	// --fsync 5ms: answers once written, synced by the window's loop.
	t.Run("FsyncWindow", func(t *testing.T) { runSuite(t, Options{SyncEvery: 5 * time.Millisecond}) })
}

// runSuite runs storetest on stores in temp dirs; Reopen closes and opens
// the same dir with the same options (a retaining store's retention
// included).
func runSuite(t *testing.T, opts Options) {
	type opened struct {
		dir  string
		opts Options
	}
	var mu sync.Mutex
	dirs := map[store.Store]opened{}
	openDir := func(t *testing.T, dir string, o Options) store.Store {
		s := openAt(t, dir, o)
		mu.Lock()
		dirs[s] = opened{dir, o}
		mu.Unlock()
		return s
	}
	storetest.Run(t, storetest.Factory{
		Open: func(t *testing.T) store.Store { return openDir(t, t.TempDir(), opts) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			mu.Lock()
			o := dirs[s]
			mu.Unlock()
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v, want nil", err)
			}
			return openDir(t, o.dir, o.opts)
		},
		OpenRetaining: func(t *testing.T, r store.Retention) store.Store {
			o := opts
			o.Retention = r
			return openDir(t, t.TempDir(), o)
		},
	})
}
