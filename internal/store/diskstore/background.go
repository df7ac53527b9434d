package diskstore

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// Background work at low priority.
//
// Pebble flushes a full memtable and compacts L0 in goroutines of their
// own, and each keeps a CPU busy for about half a second (a 64 MiB
// memtable here). On two cores that is half the machine: while one ran,
// the requests and the timer had one Go P of two, fewer jobs were served
// than came due, and the queue's age grew into the lateness tail of aim 4
// of issue 17 (every job due during a flush came 10 to 300 ms late;
// docs/benchmarks.md, ninth session). The flush need not finish in half
// a second; the requests must not wait for it.
//
// So, with Options.BackgroundNice:
//
//   - A flush or a compaction lowers the OS priority (the nice value) of
//     the thread it runs on as it begins (Pebble calls FlushBegin and
//     CompactionBegin on the job's goroutine), and keeps that thread to
//     itself (runtime.LockOSThread, never undone), so that no other
//     goroutine ever runs at that priority. When the goroutine ends, Go
//     ends its locked thread with it (or, for the process's main thread,
//     which cannot end, parks it for good, running nothing). The runtime
//     starts new threads from a clean template thread when the creating
//     one is locked, so the nice value does not spread either. The kernel
//     then runs the flush on what CPU the requests leave; RocksDB lowers
//     its compaction threads for the same reason.
//   - A thread the kernel leaves waiting still holds its Go P. With as
//     many Ps as CPUs a lowered flush would hold one of the two Ps while
//     it waits, and the requests would have one P as before. So with
//     Options.BackgroundP the process has one P more for each such job
//     while it runs (extraP), and the requests keep as many as they had.
//     Only while it runs: a P more than CPUs all the time cost 5-10% more
//     CPU per job in the scheduler's spinning.
//
// Only the jobs Pebble starts after Open has returned are lowered: Open
// may flush on its caller's goroutine.

// background lowers the flushes and compactions of one store: it hears
// each begin and end on the job's own goroutine (Pebble calls its event
// listener there).
type background struct {
	nice  int
	addP  bool
	armed atomic.Bool // set once pebble.Open has returned

	mu      sync.Mutex
	running map[int]bool // jobs that took a P, by Pebble's job id
}

// newBackground is nil when nice is 0: nothing to lower.
func newBackground(nice int, addP bool) *background {
	if nice == 0 {
		return nil
	}
	return &background{nice: nice, addP: addP, running: make(map[int]bool)}
}

// listener hears the jobs begin and end.
func (b *background) listener() pebble.EventListener {
	return pebble.EventListener{
		FlushBegin:      func(i pebble.FlushInfo) { b.begin(i.JobID) },
		FlushEnd:        func(i pebble.FlushInfo) { b.end(i.JobID) },
		CompactionBegin: func(i pebble.CompactionInfo) { b.begin(i.JobID) },
		CompactionEnd:   func(i pebble.CompactionInfo) { b.end(i.JobID) },
	}
}

// begin lowers the calling job's thread and lends it a P, unless Open
// has not returned yet.
func (b *background) begin(job int) {
	if !b.armed.Load() {
		return
	}
	lowerThread(b.nice)
	if !b.addP {
		return
	}
	b.mu.Lock()
	b.running[job] = true
	b.mu.Unlock()
	extraP.add()
}

// end gives back the P of a job that took one; a job that began inside
// Open took none.
func (b *background) end(job int) {
	b.mu.Lock()
	was := b.running[job]
	delete(b.running, job)
	b.mu.Unlock()
	if was {
		extraP.drop()
	}
}

// extraP is the process's GOMAXPROCS raised by the lowered jobs running
// in every store of the process: one P more for each.
var extraP lentPs

// lentPs counts the jobs that raised GOMAXPROCS.
type lentPs struct {
	mu   sync.Mutex
	jobs int
	base int // GOMAXPROCS before the first of them began
}

// add raises GOMAXPROCS by one for a job that begins.
func (p *lentPs) add() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.jobs == 0 {
		p.base = runtime.GOMAXPROCS(0)
	}
	p.jobs++
	runtime.GOMAXPROCS(p.base + p.jobs)
}

// drop lowers GOMAXPROCS by one for a job that ended. Once none runs it
// gives the runtime its default back (SetDefaultGOMAXPROCS), which also
// lets Go follow a change of the CPU limit again, as it does until
// GOMAXPROCS is first set.
func (p *lentPs) drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.jobs--
	if p.jobs == 0 {
		runtime.SetDefaultGOMAXPROCS()
		return
	}
	runtime.GOMAXPROCS(p.base + p.jobs)
}
