package diskstore

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2"
)

// A Go P for each flush and compaction.
//
// Pebble flushes a full memtable and compacts L0 in goroutines of their
// own, and each keeps a CPU busy for about half a second (a 64 MiB
// memtable here). With as many Ps as CPUs, on two cores, such a job held
// one of the two Ps: the requests, the committer and the timer shared
// the other, fewer jobs were served than came due, and the queue's age
// became the lateness tail of aim 4 of issue 17 (every job due during a
// flush came 10 to 300 ms late; docs/benchmarks.md, ninth session).
//
// So with Options.BackgroundP (off unless the embedding program opts in;
// the server does not, since each change of GOMAXPROCS stops the world
// and the last one replaces whatever value the program had set) the
// process has one P more for each flush
// or compaction while it runs: GOMAXPROCS rises as the job begins and
// falls as it ends (Pebble's FlushBegin and CompactionBegin, FlushEnd and
// CompactionEnd), and once none runs Go gets its default back. The
// requests keep the Ps they had, and the kernel shares the CPUs between
// the job's thread and theirs. A P more than CPUs all the time cost 5-10%
// more CPU per job in the scheduler's spinning; lent only during a job,
// it costs nothing measurable.
//
// Also tried, and not kept: running the job's thread at nice 19. It
// lowered the tail a little more, but under a flood of puts the kernel
// starved the flushes, memtables queued up to Pebble's write stall, and
// 10 million puts peaked at 328 MiB of RSS (the limit is 256) and took
// 3.9 s to restart from their longer WAL (the limit is 3 s).
//
// Only the jobs Pebble starts after Open has returned take a P: a flush
// inside Open takes none, and ends before the store serves.

// background lends the flushes and compactions of one store a P each. It
// hears them begin and end through Pebble's event listener.
type background struct {
	armed atomic.Bool // set once pebble.Open has returned

	mu      sync.Mutex
	running map[int]bool // jobs that took a P, by Pebble's job id
}

// newBackground is nil unless lend is set.
func newBackground(lend bool) *background {
	if !lend {
		return nil
	}
	return &background{running: make(map[int]bool)}
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

// begin lends a job a P, unless Open has not returned yet.
func (b *background) begin(job int) {
	if !b.armed.Load() {
		return
	}
	b.mu.Lock()
	b.running[job] = true
	b.mu.Unlock()
	extraP.add()
}

// end gives back the P of a job that took one.
func (b *background) end(job int) {
	b.mu.Lock()
	was := b.running[job]
	delete(b.running, job)
	b.mu.Unlock()
	if was {
		extraP.drop()
	}
}

// extraP is the process's GOMAXPROCS raised by the jobs running in every
// store of the process: one P more for each.
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
