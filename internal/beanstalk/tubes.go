package beanstalk

import (
	"context"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/delayq/delayq"
)

// defaultTube is the tube every connection uses and watches at first; it
// always exists, as in beanstalkd.
const defaultTube = "default"

// tubes is what the front end knows about tubes beyond the store: which
// connections use, watch and wait on each, beanstalkd's per-tube counters,
// and the order in which tubes came to exist (beanstalkd lists tubes in
// that order, filling a removed tube's place with the last one). Jobs and
// pauses live in the store; a tube exists while it is the default, a
// connection refers to it, or the store has jobs in it or a pause on it.
type tubes struct {
	mu     sync.Mutex
	byName map[string]*tube // guarded by mu
	order  []string         // guarded by mu
	clock  uint64           // guarded by mu: counts the changes to entries (tube.touched)
	peak   int              // guarded by mu: the most entries byName held since it was made
}

// tube holds one tube's connection references and counters.
type tube struct {
	using, watching, waiting int
	totalJobs, deletes       uint64
	pauses                   uint64
	pause                    time.Duration // the last pause-tube's delay
	touched                  uint64        // tubes.clock at its last change
}

func (ts *tubes) init() {
	ts.byName = make(map[string]*tube)
	ts.get(defaultTube)
}

// get returns name's entry, making it if needed, and marks it changed
// now; ts.mu must be held or the tubes not yet shared.
func (ts *tubes) get(name string) *tube {
	t := ts.byName[name]
	if t == nil {
		t = &tube{}
		ts.byName[name] = t
		ts.order = append(ts.order, name)
		ts.peak = max(ts.peak, len(ts.byName))
	}
	ts.clock++
	t.touched = ts.clock
	return t
}

// update runs f on name's entry under the lock.
func (ts *tubes) update(name string, f func(t *tube)) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	f(ts.get(name))
}

// snapshot returns a copy of name's entry and whether a connection refers
// to it.
func (ts *tubes) snapshot(name string) (tube, bool) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.byName[name]
	if t == nil {
		return tube{}, name == defaultTube
	}
	return *t, name == defaultTube || t.using > 0 || t.watching > 0
}

// list returns the names of every existing tube in beanstalkd's order.
// Store topics not seen before are appended (in name order); entries that
// no longer exist are dropped, their place taken by the last entry.
func (ts *tubes) list(stored []delayq.TopicStats, now time.Time) []string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.prune(stored, now, ts.clock+1)
	return append([]string(nil), ts.order...)
}

// mark is the clock a sweep starts at: entries changed after it are
// newer than the store figures the sweep then reads.
func (ts *tubes) mark() uint64 {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.clock
}

// sweep drops, like list, the entries that no longer exist, but only
// those unchanged since mark, when stored was not yet read: a tube put
// into after that may have jobs stored lacks. It returns how many
// entries are left.
func (ts *tubes) sweep(stored []delayq.TopicStats, now time.Time, mark uint64) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.prune(stored, now, mark+1)
	return len(ts.byName)
}

// prune adds stored's live topics and drops the entries changed before
// clock that nothing keeps. Requires mu.
func (ts *tubes) prune(stored []delayq.TopicStats, now time.Time, clock uint64) {
	live := make(map[string]bool, len(stored))
	for _, st := range stored {
		if storeHas(st, now) {
			live[st.Name] = true
			if ts.byName[st.Name] == nil {
				ts.get(st.Name)
			}
		}
	}
	for i := 0; i < len(ts.order); {
		name := ts.order[i]
		t := ts.byName[name]
		if name == defaultTube || t.using > 0 || t.watching > 0 || t.waiting > 0 || live[name] || t.touched >= clock {
			i++
			continue
		}
		delete(ts.byName, name)
		last := len(ts.order) - 1
		ts.order[i] = ts.order[last]
		ts.order = ts.order[:last]
	}
	// A Go map never gives back the room of deleted entries: once most
	// tubes are gone, copy what is left.
	if ts.peak > 1024 && len(ts.byName) < ts.peak/4 {
		byName := make(map[string]*tube, len(ts.byName))
		maps.Copy(byName, ts.byName)
		ts.byName, ts.order, ts.peak = byName, slices.Clone(ts.order), len(byName)
	}
}

// forget drops name if no connection refers to it and the store does not
// keep it (stored reports the store's view), its place in the order taken
// by the last tube, as beanstalkd frees a tube the moment it is unused.
func (ts *tubes) forget(name string, stored delayq.TopicStats, now time.Time) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	t := ts.byName[name]
	if t == nil || name == defaultTube || t.using > 0 || t.watching > 0 || storeHas(stored, now) {
		return
	}
	delete(ts.byName, name)
	for i, n := range ts.order {
		if n == name {
			last := len(ts.order) - 1
			ts.order[i] = ts.order[last]
			ts.order = ts.order[:last]
			return
		}
	}
}

// storeHas reports whether the store keeps tube st alive: it has jobs or
// is paused now.
func storeHas(st delayq.TopicStats, now time.Time) bool {
	return st.Total() > 0 || st.PausedUntil.After(now)
}

// ForgetTubes drops the tubes that no longer exist and returns how many
// are left. A connection drops a tube when it stops using or watching it
// or deletes its last job, but a tube whose jobs end another way (a
// finish over HTTP or gRPC, a purge) or whose pause runs out has no
// connection to notice: the server calls this periodically, so the
// registry holds the tubes that exist, not every tube ever named.
func (s *Server) ForgetTubes(ctx context.Context) (int, error) {
	s.init()
	mark := s.tubes.mark()
	stored, err := s.Engine.Topics(ctx)
	if err != nil {
		return 0, err
	}
	return s.tubes.sweep(stored, time.Now(), mark), nil
}
