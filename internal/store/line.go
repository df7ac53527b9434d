package store

import (
	"context"
	"iter"
	"slices"
	"sync"
)

// Line gathers concurrent calls of one kind (puts, finishes) into groups
// that a store writes together: one statement or script, one round trip,
// one durable commit for many calls. A store's cost per call is mostly
// paid once per round trip (the command's parsing and dispatch, the
// writes and wake-ups on both sides, a transaction's start and commit),
// not per job.
//
// At most InFlight groups are written at a time. A call that finds a
// free slot is written at once, in its caller's goroutine, as a group of
// one: a lone call waits for nobody, and there is no timer. A call that
// finds every slot busy waits in line; when a group is written, the
// calls waiting by then (as many as Joins and the limits let in) go out
// as the next group, written by a goroutine started for it, while the
// finished group's callers return. So a group gathers exactly what
// arrived while the one before it was in flight.
//
// Write answers each call on its own (C is usually a pointer to a struct
// holding the call's arguments and answer); the Line only decides which
// calls go together. Set the fields before the first call to Do, and
// copy no Line after that.
type Line[C any] struct {
	// Write writes one group, in the order the calls were taken, and
	// sets each call's answer before it returns. Required. Its ctx is
	// the caller's for a group of one written in its caller's goroutine
	// (so a lone call keeps its caller's deadline, as without a Line),
	// else Ctx: a gathered group writes for all its callers, and none of
	// them may cut it off.
	Write func(ctx context.Context, calls []C)

	// Ctx is the context of the writes of gathered groups, usually the
	// store's lifetime; nil means context.Background().
	Ctx context.Context

	// InFlight is how many groups are written at a time; 0 means 1.
	InFlight int

	// Size, if set, gives a call's jobs and body bytes, which MaxJobs
	// and MaxBytes bound per group. A call past a bound by itself goes
	// alone.
	Size     func(c C) (jobs, bytes int)
	MaxJobs  int // jobs per group; 0 for no bound
	MaxBytes int // body bytes per group; 0 for no bound

	// Joins, if set, is called once per group being gathered and returns
	// the check each waiting call is put to, in arrival order: the first
	// call is offered too (it always goes, whatever the check says, so
	// the check can note it), and gathering stops at the first call the
	// check refuses, which leads the next group. A check that refuses a
	// call repeating an id already in the group keeps two calls of one id
	// out of one group.
	Joins func() func(c C) bool

	mu       sync.Mutex
	waiting  []*lineCall[C] // in arrival order; guarded by mu
	inflight int            // groups being written; guarded by mu
}

// lineCall is one call waiting in line.
type lineCall[C any] struct {
	c    C
	done chan struct{} // closed once its group is written
}

// Do writes c through a group and returns nil once its group has been
// written (c holds its answer then). A caller whose ctx ends while it
// waits in line leaves the line unwritten; once its gathered group is
// being written it gets ctx's error at once, not an answer (the group
// may still write the call, as a call cut off while its command is on
// the wire may). Do returns ctx.Err() in both cases. A call written
// alone, at once, is written under ctx (Write) and answered by Write.
func (l *Line[C]) Do(ctx context.Context, c C) error {
	l.mu.Lock()
	if l.inflight < max(l.InFlight, 1) {
		l.inflight++
		l.mu.Unlock()
		l.write(ctx, []*lineCall[C]{{c: c}})
		return nil
	}
	w := &lineCall[C]{c: c, done: make(chan struct{})}
	l.waiting = append(l.waiting, w)
	l.mu.Unlock()
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
	}
	l.mu.Lock()
	if i := slices.Index(l.waiting, w); i >= 0 {
		l.waiting = slices.Delete(l.waiting, i, i+1)
	}
	l.mu.Unlock()
	select {
	case <-w.done: // written meanwhile
		return nil
	default:
		return ctx.Err()
	}
}

// Waiting is how many calls wait in line (not those being written).
func (l *Line[C]) Waiting() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.waiting)
}

// Writing is how many groups are being written.
func (l *Line[C]) Writing() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.inflight
}

// write writes one group under ctx in the slot its caller holds, tells
// its callers, and hands the slot on: to the calls that waited
// meanwhile, in a goroutine of their own, or back to the line.
func (l *Line[C]) write(ctx context.Context, group []*lineCall[C]) {
	calls := make([]C, len(group))
	for i, w := range group {
		calls[i] = w.c
	}
	l.Write(ctx, calls)
	for _, w := range group {
		if w.done != nil {
			close(w.done)
		}
	}
	l.mu.Lock()
	next := l.take()
	if len(next) == 0 {
		l.inflight--
	}
	l.mu.Unlock()
	if len(next) > 0 {
		ctx := l.Ctx
		if ctx == nil {
			ctx = context.Background()
		}
		go l.write(ctx, next)
	}
}

// take removes from the front of the line the calls of the next group:
// in arrival order, within MaxJobs and MaxBytes (the first call whatever
// its size), stopping before the first call Joins refuses. Requires mu.
func (l *Line[C]) take() []*lineCall[C] {
	if len(l.waiting) == 0 {
		return nil
	}
	var joins func(C) bool
	if l.Joins != nil {
		joins = l.Joins()
	}
	jobs, bytes, n := 0, 0, 0
	for _, w := range l.waiting {
		cj, cb := 0, 0
		if l.Size != nil {
			cj, cb = l.Size(w.c)
		}
		if n > 0 && (over(jobs+cj, l.MaxJobs) || over(bytes+cb, l.MaxBytes)) {
			break
		}
		if joins != nil && !joins(w.c) && n > 0 {
			break
		}
		jobs, bytes, n = jobs+cj, bytes+cb, n+1
	}
	out := make([]*lineCall[C], n)
	copy(out, l.waiting)
	rest := copy(l.waiting, l.waiting[n:])
	clear(l.waiting[rest:])
	l.waiting = l.waiting[:rest]
	return out
}

// over says whether n passes the bound max (0 for none).
func over(n, max int) bool { return max > 0 && n > max }

// DistinctKeys returns a Line.Joins that refuses a call naming a key (a
// job id) that a call already in the group names, so that calls on one
// job are written in separate groups, in the order they came, each
// seeing the one before it done.
func DistinctKeys[C any](keys func(c C) iter.Seq[string]) func() func(C) bool {
	return func() func(C) bool {
		seen := map[string]bool{}
		return func(c C) bool {
			for k := range keys(c) {
				if seen[k] {
					return false
				}
			}
			for k := range keys(c) {
				seen[k] = true
			}
			return true
		}
	}
}
