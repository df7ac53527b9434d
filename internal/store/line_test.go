package store_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// lineCall is one call through a test Line: its keys, size and answer.
type lineCall struct {
	name        string
	keys        []string
	jobs, bytes int
	group       int // the number of the group that wrote it, set by Write
}

// writer is a Line's Write that holds every group until the test lets
// it go: each group is announced on started, then waits for a token on
// proceed.
type writer struct {
	t       *testing.T
	started chan []*lineCall
	proceed chan struct{}
	mu      sync.Mutex
	groups  [][]string // names of each group's calls, in write order
	ctxs    []any      // each group's ctx's value of lineKey
}

// lineKey is the key of a test's context value.
type lineKey struct{}

func newLine(t *testing.T) (*store.Line[*lineCall], *writer) {
	w := &writer{t: t, started: make(chan []*lineCall, 64), proceed: make(chan struct{})}
	l := &store.Line[*lineCall]{Write: w.write}
	return l, w
}

func (w *writer) write(ctx context.Context, calls []*lineCall) {
	w.mu.Lock()
	n := len(w.groups) + 1
	w.groups = append(w.groups, names(calls))
	w.ctxs = append(w.ctxs, ctx.Value(lineKey{}))
	w.mu.Unlock()
	w.started <- calls
	<-w.proceed
	for _, c := range calls {
		c.group = n
	}
}

// next waits for the next group to start writing and returns its calls'
// names.
func (w *writer) next() string {
	w.t.Helper()
	select {
	case g := <-w.started:
		return strings.Join(names(g), ",")
	case <-time.After(10 * time.Second):
		w.t.Fatal("timed out waiting for a group to be written")
		return ""
	}
}

// finish lets the group in flight finish.
func (w *writer) finish() {
	w.t.Helper()
	select {
	case w.proceed <- struct{}{}:
	case <-time.After(10 * time.Second):
		w.t.Fatal("timed out waiting for a group to finish")
	}
}

func names(calls []*lineCall) []string {
	out := make([]string, len(calls))
	for i, c := range calls {
		out[i] = c.name
	}
	return out
}

// calls runs Do calls in goroutines, each started once the one before it
// waits in line (or is being written), so they line up in the order
// given.
type calls struct {
	t    *testing.T
	l    *store.Line[*lineCall]
	wg   sync.WaitGroup
	errs map[string]*error
}

func (cs *calls) start(ctx context.Context, c *lineCall, inLine int) {
	cs.t.Helper()
	e := new(error)
	if cs.errs == nil {
		cs.errs = map[string]*error{}
	}
	cs.errs[c.name] = e
	cs.wg.Add(1)
	go func() {
		defer cs.wg.Done()
		*e = cs.l.Do(ctx, c)
	}()
	waitFor(cs.t, fmt.Sprintf("%d calls in line", inLine), func() bool { return cs.l.Waiting() == inLine })
}

func (cs *calls) err(name string) error { return *cs.errs[name] }

// waitFor polls cond (a count the Line reports) until it holds, failing
// after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestLineLoneCallGoesAtOnce: a call that finds the line idle is written
// at once, alone, in its caller's goroutine and under its context (Do
// returns with its answer set), and the slot is free again after it.
func TestLineLoneCallGoesAtOnce(t *testing.T) {
	var groups [][]string
	l := &store.Line[*lineCall]{Write: func(ctx context.Context, calls []*lineCall) {
		groups = append(groups, names(calls)) // no lock: only the caller's goroutine writes
		for _, c := range calls {
			c.group = len(groups)
			if ctx.Value(lineKey{}) != c.name {
				t.Errorf("%s written under another context than its caller's", c.name)
			}
		}
	}}
	for i, name := range []string{"a", "b"} {
		c := &lineCall{name: name}
		if err := l.Do(context.WithValue(t.Context(), lineKey{}, name), c); err != nil || c.group != i+1 {
			t.Fatalf("Do(%s) = %v, group %d; want nil, group %d", name, err, c.group, i+1)
		}
	}
	if fmt.Sprint(groups) != "[[a] [b]]" {
		t.Errorf("groups = %v, want [[a] [b]]", groups)
	}
}

// TestLineGathersWhileOneIsInFlight: the calls that arrive while a group
// is being written go out together as the next group, in arrival order,
// once it is done, written under the Line's Ctx; the ones after that, as
// the group after.
func TestLineGathersWhileOneIsInFlight(t *testing.T) {
	l, w := newLine(t)
	l.Ctx = context.WithValue(t.Context(), lineKey{}, "line")
	cs := &calls{t: t, l: l}
	cs.start(context.WithValue(t.Context(), lineKey{}, "a"), &lineCall{name: "a"}, 0)
	if g := w.next(); g != "a" {
		t.Fatalf("first group = %s, want a", g)
	}
	for i, n := range []string{"b", "c", "d"} {
		cs.start(t.Context(), &lineCall{name: n}, i+1)
	}
	w.finish()
	if g := w.next(); g != "b,c,d" {
		t.Fatalf("second group = %s, want b,c,d", g)
	}
	cs.start(t.Context(), &lineCall{name: "e"}, 1)
	w.finish()
	if g := w.next(); g != "e" {
		t.Fatalf("third group = %s, want e", g)
	}
	w.finish()
	cs.wg.Wait()
	for n := range cs.errs {
		if err := cs.err(n); err != nil {
			t.Errorf("Do(%s) = %v", n, err)
		}
	}
	// A lone call after the line went idle goes at once again.
	cs.start(t.Context(), &lineCall{name: "f"}, 0)
	if g := w.next(); g != "f" {
		t.Fatalf("group after idle = %s, want f", g)
	}
	w.finish()
	cs.wg.Wait()
}

// TestLineLimits: a group stops before the call that would pass MaxJobs
// or MaxBytes; a call past a limit by itself goes alone.
func TestLineLimits(t *testing.T) {
	l, w := newLine(t)
	l.Size = func(c *lineCall) (int, int) { return c.jobs, c.bytes }
	l.MaxJobs, l.MaxBytes = 4, 100
	cs := &calls{t: t, l: l}
	cs.start(t.Context(), &lineCall{name: "hold", jobs: 1}, 0)
	w.next()
	line := []*lineCall{
		{name: "a", jobs: 2, bytes: 10},
		{name: "b", jobs: 2, bytes: 10}, // a+b: 4 jobs, at the bound
		{name: "c", jobs: 1, bytes: 60},
		{name: "d", jobs: 1, bytes: 50}, // c+d: 110 bytes, past the bound
		{name: "big", jobs: 9, bytes: 500},
		{name: "e", jobs: 1, bytes: 1},
	}
	for i, c := range line {
		cs.start(t.Context(), c, i+1)
	}
	for _, want := range []string{"a,b", "c", "d", "big", "e"} {
		w.finish()
		if g := w.next(); g != want {
			t.Fatalf("group = %s, want %s", g, want)
		}
	}
	w.finish()
	cs.wg.Wait()
}

// TestLineKeepsOneKeyInSeparateGroups: with DistinctKeys, a call that
// repeats a key of the group being gathered starts the next group (the
// calls behind it wait with it, keeping their order).
func TestLineKeepsOneKeyInSeparateGroups(t *testing.T) {
	l, w := newLine(t)
	l.Joins = store.DistinctKeys(func(c *lineCall) iter.Seq[string] { return slices.Values(c.keys) })
	cs := &calls{t: t, l: l}
	cs.start(t.Context(), &lineCall{name: "hold", keys: []string{"x"}}, 0)
	w.next()
	line := []*lineCall{
		{name: "a", keys: []string{"x", "y"}},
		{name: "b", keys: []string{"z"}},
		{name: "c", keys: []string{"w", "y"}}, // y is a's
		{name: "d", keys: []string{"v"}},
		{name: "e", keys: []string{"v"}}, // v is d's
	}
	for i, c := range line {
		cs.start(t.Context(), c, i+1)
	}
	for _, want := range []string{"a,b", "c,d", "e"} {
		w.finish()
		if g := w.next(); g != want {
			t.Fatalf("group = %s, want %s", g, want)
		}
	}
	w.finish()
	cs.wg.Wait()
}

// TestLineCallerGivesUp: a caller whose ctx ends while it waits in line
// leaves it and is never written; one whose ctx ends while its group is
// being written gets ctx's error at once, without waiting for the write.
func TestLineCallerGivesUp(t *testing.T) {
	l, w := newLine(t)
	cs := &calls{t: t, l: l}
	ctx := t.Context()
	cs.start(ctx, &lineCall{name: "hold"}, 0)
	w.next()
	quit, cancel := context.WithCancel(ctx)
	cs.start(ctx, &lineCall{name: "a"}, 1)
	cs.start(quit, &lineCall{name: "quit"}, 2)
	cs.start(ctx, &lineCall{name: "b"}, 3)
	cancel()
	waitFor(t, "the cancelled call to leave the line", func() bool { return l.Waiting() == 2 })
	w.finish()
	if g := w.next(); g != "a,b" {
		t.Fatalf("group = %s, want a,b (without the cancelled call)", g)
	}

	// c's group is in flight when c gives up: Do returns at once.
	late, cancelLate := context.WithCancel(ctx)
	cs.start(late, &lineCall{name: "c"}, 1)
	w.finish()
	if g := w.next(); g != "c" {
		t.Fatalf("group = %s, want c", g)
	}
	gaveUp := make(chan error)
	go func() {
		// Wait for c's own goroutine: its error is set when Do returns.
		cancelLate()
		cs.wg.Wait()
		gaveUp <- cs.err("c")
	}()
	select {
	case err := <-gaveUp:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Do(c), cancelled while written = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a caller that gave up while its group was written waited for the write")
	}
	w.finish()
	if !errors.Is(cs.err("quit"), context.Canceled) {
		t.Errorf("Do(quit) = %v, want context.Canceled", cs.err("quit"))
	}
	for _, n := range []string{"hold", "a", "b"} {
		if err := cs.err(n); err != nil {
			t.Errorf("Do(%s) = %v, want nil", n, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if fmt.Sprint(w.groups) != "[[hold] [a b] [c]]" {
		t.Errorf("groups written = %v, want [[hold] [a b] [c]]", w.groups)
	}
}

// TestLineInFlight: with InFlight 2, two lone calls are written at the
// same time, and a third waits for one of them.
func TestLineInFlight(t *testing.T) {
	l, w := newLine(t)
	l.InFlight = 2
	cs := &calls{t: t, l: l}
	cs.start(t.Context(), &lineCall{name: "a"}, 0)
	w.next()
	cs.start(t.Context(), &lineCall{name: "b"}, 0)
	w.next()
	if n := l.Writing(); n != 2 {
		t.Fatalf("Writing() = %d, want 2", n)
	}
	cs.start(t.Context(), &lineCall{name: "c"}, 1)
	w.finish()
	if g := w.next(); g != "c" {
		t.Fatalf("group = %s, want c", g)
	}
	w.finish()
	w.finish()
	cs.wg.Wait()
	// c's group hands its slot back after c returns.
	waitFor(t, "both slots free", func() bool { return l.Writing() == 0 })
}
