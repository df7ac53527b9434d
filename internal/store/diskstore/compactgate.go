package diskstore

import (
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// gatedScheduler is the compaction scheduler of every Pebble this package
// opens for writing. It runs one compaction at a time, as Pebble's own
// default scheduler does, and none until release is called, right after
// pebble.Open returns.
//
// Why: pebble.Open flushes the memtables it replayed from the WAL, and the
// flush's end starts a compaction at once; Open then waits for every
// running compaction before it returns (scanObsoleteFiles, pebble v2.1.7
// obsolete_files.go). After a kill -9 under a put load the store carries
// compaction debt, and that first compaction can be a 100 MB rewrite: a
// store of 10 million jobs took 3.6-8.9 s to open, nearly all of it
// waiting for a compaction nobody needed before serving. Held back, the
// same compaction runs right after Open, beside the first requests.
type gatedScheduler struct {
	mu sync.Mutex
	db pebble.DBForCompaction
	// open is set by release: compactions may run.
	open bool
	// running counts granted compactions not yet Done.
	running int
	// granting serializes grant: Done, release and the ticker all grant.
	granting     bool
	grantingDone *sync.Cond
	unregistered bool
	poke         chan struct{}
	stop         chan struct{}
	stopped      chan struct{}
	halting      sync.Once
}

var _ pebble.CompactionScheduler = (*gatedScheduler)(nil)

// maxCompactions is how many compactions run at once: Pebble's default
// (CompactionConcurrencyRange 1, 1). On two cores a second one would take
// the CPU the requests need.
const maxCompactions = 1

func newGatedScheduler() *gatedScheduler {
	g := &gatedScheduler{poke: make(chan struct{}, 1), stop: make(chan struct{}), stopped: make(chan struct{})}
	g.grantingDone = sync.NewCond(&g.mu)
	return g
}

// Register is called by pebble.Open before its opening flush.
func (g *gatedScheduler) Register(_ int, db pebble.DBForCompaction) {
	g.db = db
	go g.periodic()
}

// Unregister is called by DB.Close; no grant runs after it returns.
func (g *gatedScheduler) Unregister() {
	g.halt()
	g.mu.Lock()
	defer g.mu.Unlock()
	g.unregistered = true
	for g.granting {
		g.grantingDone.Wait()
	}
}

// halt stops the ticker: at Unregister, or when pebble.Open failed (it
// does not unregister its scheduler then).
func (g *gatedScheduler) halt() {
	g.halting.Do(func() {
		close(g.stop)
		if g.db != nil {
			<-g.stopped
		}
	})
}

// TrySchedule is Pebble asking, with its own mutex held, whether a
// compaction it picked may start now. A "no" leaves it waiting, and grant
// starts it later through DBForCompaction.Schedule.
func (g *gatedScheduler) TrySchedule() (bool, pebble.CompactionGrantHandle) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.mayStart() {
		return false, nil
	}
	g.running++
	return true, g
}

// UpdateGetAllowedWithoutPermission is Pebble saying its allowance may
// have grown. Pebble calls it with its mutex held (at a flush's end), and
// grant takes that mutex, so the ticker's goroutine grants.
func (g *gatedScheduler) UpdateGetAllowedWithoutPermission() {
	select {
	case g.poke <- struct{}{}:
	default:
	}
}

// mayStart reports whether one more compaction may start now: after
// release, before Unregister, within the allowance. Requires mu.
func (g *gatedScheduler) mayStart() bool {
	return !g.unregistered && g.open && g.running < min(maxCompactions, g.db.GetAllowedWithoutPermission())
}

// release lets compactions run, and starts the one Pebble is waiting to
// run if any.
func (g *gatedScheduler) release() {
	g.mu.Lock()
	g.open = true
	g.mu.Unlock()
	g.grant()
}

// grant starts waiting compactions while the allowance has room. Pebble's
// calls (GetWaitingCompaction, Schedule) take Pebble's mutex, which Pebble
// may hold while it calls TrySchedule, so they are made without mu.
func (g *gatedScheduler) grant() {
	g.mu.Lock()
	for g.granting {
		g.grantingDone.Wait()
	}
	g.granting = true
	for g.mayStart() {
		g.mu.Unlock()
		waiting, _ := g.db.GetWaitingCompaction()
		started := waiting && g.db.Schedule(g)
		g.mu.Lock()
		if !started {
			break
		}
		g.running++
	}
	g.granting = false
	g.grantingDone.Broadcast()
	g.mu.Unlock()
}

// periodic grants when poked, and every 100 ms as Pebble's default
// scheduler does: Pebble does not tell its scheduler every time a waiting
// compaction becomes runnable (it dampens TrySchedule while one waits).
func (g *gatedScheduler) periodic() {
	defer close(g.stopped)
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			g.grant()
		case <-g.poke:
			g.grant()
		case <-g.stop:
			return
		}
	}
}

// The CompactionGrantHandle methods: Pebble reports a granted compaction's
// progress; only its end matters here.

// Started is called when a granted compaction starts.
func (g *gatedScheduler) Started() {}

// MeasureCPU is called by a compaction's goroutines; unused.
func (g *gatedScheduler) MeasureCPU(pebble.CompactionGoroutineKind) {}

// CumulativeStats reports a compaction's progress; unused.
func (g *gatedScheduler) CumulativeStats(pebble.CompactionGrantHandleStats) {}

// Done is called when a granted compaction ends: start the next.
func (g *gatedScheduler) Done() {
	g.mu.Lock()
	g.running--
	g.mu.Unlock()
	g.grant()
}
