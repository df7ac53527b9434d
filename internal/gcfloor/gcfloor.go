// Package gcfloor keeps Go's garbage collector from running more often
// than a heap of a given size would make it.
//
// Most of delayq's data lives outside the Go heap (Pebble's memtables and
// block cache are manually managed memory), so the Go heap the collector
// paces itself by is a few MiB, and with the default GOGC=100 a server
// handling a few thousand jobs a second collected two to five times a
// second. Every cycle costs stop-the-world pauses, a quarter of the CPU
// for marking and mark assists charged to whichever goroutine allocates,
// and on a 2-core machine a job that falls due during a cycle is served
// late. A floor on the heap goal makes those cycles rarer while the heap
// is small and changes nothing once it is larger: above the floor the
// pacing is Go's own.
package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
)

// DefaultFloor is the heap goal below which delayq does not let the
// collector run: 32 MiB. It raises the goal of a small heap (a few MiB of
// live data, the usual case) by at most that much of RSS, and leaves the
// pacing of a heap with 16 MiB or more of live data alone.
const DefaultFloor = 32 << 20

// heapMinimum is Go's smallest heap goal at GOGC=100, which it scales
// with GOGC: at GOGC=p no goal is below heapMinimum×p/100. So the floor
// never needs a GOGC above floor×100/heapMinimum, and a higher one would
// overshoot it while the heap is almost empty (right after start).
const heapMinimum = 4 << 20

// basePercent is Go's default GOGC, the pacing above the floor.
const basePercent = 100

// sentinel is the object whose collection signals the end of a GC cycle.
// The pointer keeps it out of the tiny allocator, whose blocks are freed
// late or never.
type sentinel struct {
	_ *int
	_ [8]byte
}

// Tuner is a running floor; Stop ends it.
type Tuner struct {
	floor uint64

	mu      sync.Mutex
	stopped bool
	percent int // the GOGC set last
	cycles  int // GC cycles seen
	prev    int // GOGC before Start, restored by Stop
	sample  []metrics.Sample
}

// Start keeps the collector's heap goal at least floor bytes for the rest
// of the process, or until Stop. It does nothing (and returns nil) when
// the GOGC environment variable is set: the operator chose the pacing.
// After each GC cycle it sets GOGC so that the next goal, live heap ×
// (1 + GOGC/100), is at least floor, and never below Go's default of 100.
// A memory limit (GOMEMLIMIT) still applies.
func Start(floor uint64) *Tuner {
	if _, set := os.LookupEnv("GOGC"); set || floor == 0 {
		return nil
	}
	t := &Tuner{floor: floor, percent: -1,
		sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/stack:bytes"}, {Name: "/gc/scan/globals:bytes"}}}
	t.prev = debug.SetGCPercent(basePercent)
	t.percent = basePercent
	t.adjust()
	t.arm()
	return t
}

// arm allocates a sentinel whose cleanup runs after the next cycle that
// finds it unreachable, that is after every GC cycle.
func (t *Tuner) arm() {
	runtime.AddCleanup(&sentinel{}, func(t *Tuner) { t.cycle() }, t)
}

func (t *Tuner) cycle() {
	t.mu.Lock()
	stopped := t.stopped
	t.cycles++
	t.mu.Unlock()
	if stopped {
		return
	}
	t.adjust()
	t.arm()
}

// adjust sets GOGC for the live heap of the last cycle.
func (t *Tuner) adjust() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	metrics.Read(t.sample)
	var v [3]uint64 // live heap, stacks, globals
	for i, s := range t.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	p := PercentFor(v[0], v[1]+v[2], t.floor)
	// Small changes are not worth a pacer update each cycle.
	if p == t.percent || (p > basePercent && t.percent > basePercent && within(p, t.percent, 10)) {
		return
	}
	debug.SetGCPercent(p)
	t.percent = p
}

// PercentFor is the GOGC that makes the heap goal at least floor: Go's
// 100 when that already does. Go's goal is live + (live + roots) ×
// GOGC/100, where roots are the goroutine stacks and globals it scans
// (a megabyte of globals alone, in this binary): leaving them out would
// overshoot the floor severalfold while the live heap is small.
func PercentFor(live, roots, floor uint64) int {
	most := max(floor*100/heapMinimum, basePercent)
	scan := live + roots
	if scan == 0 {
		return int(most)
	}
	if live+scan*basePercent/100 >= floor {
		return basePercent
	}
	p := (floor - live) * 100 / scan
	return int(min(max(p, basePercent), most))
}

// within reports whether a and b differ by at most pct percent of b.
func within(a, b, pct int) bool {
	d := a - b
	if d < 0 {
		d = -d
	}
	return d*100 <= b*pct
}

// Stop ends the floor and restores the GOGC from before Start. Safe on a
// nil Tuner (Start did nothing).
func (t *Tuner) Stop() {
	if t == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.stopped {
		return
	}
	t.stopped = true
	debug.SetGCPercent(t.prev)
}

// Percent is the GOGC the floor set last, and Cycles how many GC cycles
// it has seen; for tests and logs.
func (t *Tuner) Percent() (percent, cycles int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.percent, t.cycles
}
