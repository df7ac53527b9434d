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

// heldWALSyncs is the real filesystem with a gate on WAL syncs: while
// held, every WAL sync waits, counted in blocked, until release.
type heldWALSyncs struct {
	vfs.FS
	mu      sync.Mutex
	held    bool
	release chan struct{}
	blocked int          // syncs waiting at the gate
	syncs   atomic.Int64 // WAL syncs begun
}

func newHeldWALSyncs() *heldWALSyncs {
	h := &heldWALSyncs{release: make(chan struct{})}
	h.FS = errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if !strings.HasSuffix(op.Path, ".log") || (op.Kind != errorfs.OpFileSync && op.Kind != errorfs.OpFileSyncData) {
			return nil
		}
		h.syncs.Add(1)
		h.mu.Lock()
		if !h.held {
			h.mu.Unlock()
			return nil
		}
		h.blocked++
		h.mu.Unlock()
		<-h.release
		return nil
	}))
	return h
}

func (h *heldWALSyncs) hold() {
	h.mu.Lock()
	h.held = true
	h.mu.Unlock()
}

// open lets every waiting sync go and holds no more.
func (h *heldWALSyncs) open() {
	h.mu.Lock()
	h.held = false
	h.mu.Unlock()
	close(h.release)
}

// waitBlocked waits until n syncs wait at the gate.
func (h *heldWALSyncs) waitBlocked(t *testing.T, n int, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		h.mu.Lock()
		b := h.blocked
		h.mu.Unlock()
		if b >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d WAL syncs waiting after 10 s, want %d: %s", b, n, why)
		}
		time.Sleep(time.Millisecond)
	}
}

// heldCommits is a store whose WAL syncs are held at a gate: the
// transitions put through it gather behind the held syncs until release.
type heldCommits struct {
	t        *testing.T
	s        *Store
	h        *heldWALSyncs
	wg       sync.WaitGroup
	released bool
}

// newHeldCommits opens a store with its WAL syncs held; the test's end
// opens the gate (if the test did not) before it closes the store.
func newHeldCommits(t *testing.T) *heldCommits {
	r := &heldCommits{t: t, h: newHeldWALSyncs()}
	r.s = openAt(t, t.TempDir(), Options{fs: r.h})
	r.h.hold()
	t.Cleanup(func() {
		r.release()
		_ = r.s.Close()
	})
	return r
}

// put puts a job with the given id in its own goroutine.
func (r *heldCommits) put(id string) { r.wg.Go(func() { putOne(r.t, r.s, id) }) }

// gather puts n jobs named prefix0.. and waits until the open group holds
// them all: the committer has not taken them.
func (r *heldCommits) gather(prefix string, n int) {
	for i := range n {
		r.put(fmt.Sprintf("%s%d", prefix, i))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.s.mu.Lock()
		ops := r.s.open.ops
		r.s.mu.Unlock()
		if ops == n {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("%d of %d transitions in the open group after 10 s", ops, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// release opens the gate and waits for every put to return.
func (r *heldCommits) release() {
	if !r.released {
		r.released = true
		r.h.open()
	}
	r.wg.Wait()
}

// checkGot fails the test for each job named prefix0..prefix(n-1) the
// store does not hold.
func (r *heldCommits) checkGot(prefix string, n int) {
	for i := range n {
		if _, err := r.s.Get(r.t.Context(), delayq.Ref{ID: fmt.Sprintf("%s%d", prefix, i)}); err != nil {
			r.t.Errorf("Get(%s%d) = %v", prefix, i, err)
		}
	}
}

// Overlapping syncs: transitions that arrive while a group's fsync is in
// flight do not wait for that fsync to end before their own begins (the
// old committer held the next group back until the previous one was
// durable, so on a slow disk a transition waited for about two syncs).
// Once overlapAt have gathered, their group's sync starts beside the one
// in flight; once syncsInFlight syncs are running, everything that
// arrives shares the next group and its one sync.
func TestGroupCommitOverlapsSyncs(t *testing.T) {
	r := newHeldCommits(t)
	h, put := r.h, r.put
	put("first")
	h.waitBlocked(t, 1, "the first transition's sync did not begin")
	for i := 1; i < syncsInFlight; i++ {
		for k := range overlapAt {
			put(fmt.Sprintf("wave%d-%d", i, k))
		}
		h.waitBlocked(t, i+1, fmt.Sprintf("%d transitions arrived during %d syncs in flight and their own did not begin", overlapAt, i))
	}
	// Every slot is taken: the next transitions gather in the open group.
	const n = 20
	r.gather("more", n)
	before := h.syncs.Load()
	r.release()
	if got := h.syncs.Load() - before; got > 2 {
		t.Errorf("%d transitions that arrived while every sync slot was busy made %d WAL syncs, want at most 2 (one group)", n, got)
	}
	r.checkGot("more", n)
}

// TestCommitterSleepsUntilItCanCommit: a transition wakes the committer
// only when the committer would commit the open group now. While one sync
// is held, fewer than overlapAt transitions, and while every sync slot is
// held any number of them, gather in the open group without waking it; it
// wakes for the group once a slot frees, and every transition is durable.
// Before, every transition kicked the committer, which took the store
// mutex, found it could not commit, and slept again.
func TestCommitterSleepsUntilItCanCommit(t *testing.T) {
	r := newHeldCommits(t)
	s, h, put := r.s, r.h, r.put
	wakes := func() int {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.wakes
	}
	put("first")
	h.waitBlocked(t, 1, "the first transition's sync did not begin")
	w0 := wakes()
	r.gather("few", overlapAt-1)
	if got := wakes() - w0; got != 0 {
		t.Errorf("%d transitions, too few to start a sync beside the one in flight, woke the committer %d times, want 0", overlapAt-1, got)
	}
	put("eighth") // the group reaches overlapAt: its sync starts beside
	h.waitBlocked(t, 2, "a group of overlapAt transitions did not start its sync beside the one in flight")
	for i := 2; i < syncsInFlight; i++ {
		for k := range overlapAt {
			put(fmt.Sprintf("wave%d-%d", i, k))
		}
		h.waitBlocked(t, i+1, "a wave of overlapAt transitions did not start its sync")
	}
	w1 := wakes()
	const n = 20
	r.gather("more", n) // every sync slot is taken
	if got := wakes() - w1; got != 0 {
		t.Errorf("%d transitions that arrived while every sync slot was busy woke the committer %d times, want 0", n, got)
	}
	r.release()
	r.checkGot("more", n)
}
