package redisstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// pauseWrites makes Redis hold every write, scripts included, until the
// returned release runs (or 10 s pass): the put in flight then stays in
// flight while a test lines others up behind it. The pause comes from a
// connection of its own, which also releases it.
func pauseWrites(t *testing.T, addr string) (release func()) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	cmd := func(line string) {
		t.Helper()
		if _, err := c.Write([]byte(line + "\r\n")); err != nil {
			t.Fatal(err)
		}
		if got, err := r.ReadString('\n'); err != nil || got != "+OK\r\n" {
			t.Fatalf("%s = %q, %v", line, got, err)
		}
	}
	cmd("CLIENT PAUSE 10000 WRITE")
	var once sync.Once
	release = func() {
		once.Do(func() {
			cmd("CLIENT UNPAUSE")
			c.Close()
		})
	}
	t.Cleanup(release)
	return release
}

// linedPuts runs Put calls in goroutines, each started once the one
// before it is in flight or waits in s's put line, so they line up in
// the order given.
type linedPuts struct {
	t    *testing.T
	s    *Store
	wg   sync.WaitGroup
	errs []*error
}

// hold starts a Put that takes one of its line's slots (Redis holds it).
func (p *linedPuts) hold(jobs ...*delayq.Job) int {
	p.t.Helper()
	return p.holdBy(false, jobs...)
}

// holdBy is hold with Put, or PutFresh when fresh (whose line on a
// Cluster is its topic's master's: lineOf).
func (p *linedPuts) holdBy(fresh bool, jobs ...*delayq.Job) int {
	p.t.Helper()
	l := p.s.lineOf(jobs[0].Topic, fresh)
	n := l.Writing()
	i := p.startBy(p.t.Context(), 0, fresh, jobs...)
	waitFor(p.t, 10*time.Second, "the put in flight", func() bool { return l.Writing() == n+1 })
	return i
}

// start starts a Put and waits until inLine puts wait in its line (on
// a Cluster, its topic's).
func (p *linedPuts) start(ctx context.Context, inLine int, jobs ...*delayq.Job) int {
	p.t.Helper()
	return p.startBy(ctx, inLine, false, jobs...)
}

// startBy is start with Put, or PutFresh when fresh.
func (p *linedPuts) startBy(ctx context.Context, inLine int, fresh bool, jobs ...*delayq.Job) int {
	p.t.Helper()
	put := p.s.Put
	if fresh {
		put = p.s.PutFresh
	}
	e := new(error)
	p.errs = append(p.errs, e)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		*e = put(ctx, jobs)
	}()
	l := p.s.lineOf(jobs[0].Topic, fresh)
	waitFor(p.t, 10*time.Second, fmt.Sprintf("%d puts in line", inLine), func() bool { return l.Waiting() == inLine })
	return len(p.errs) - 1
}

func (p *linedPuts) err(i int) error { return *p.errs[i] }

// countCommits counts s's write round trips from now on.
func countCommits(s *Store) *atomic.Int64 {
	var n atomic.Int64
	s.ObserveCommits(func(time.Duration) { n.Add(1) })
	return &n
}

// steadySeqs gives s a block of seqs that does not age out, so its puts
// run their one script and nothing else.
func steadySeqs(t *testing.T, s *Store) {
	t.Helper()
	if _, err := s.takeSeqs(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	s.seqs.mu.Lock()
	s.seqs.at = time.Now().Add(time.Hour)
	s.seqs.mu.Unlock()
}

func readyIn(id, topic string) *delayq.Job {
	now := delayq.TruncMilli(time.Now())
	return &delayq.Job{ID: id, Topic: topic, Body: []byte("body of " + id), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
}

// TestOneNodeConcurrentPutsShareOneScript: on one node the puts that
// arrive while another is in flight go to Redis together, as one script
// call (one write round trip), with seqs in their order of arrival and
// one wake-up per topic for the whole group; before, each put was a
// script call and a wake-up of its own.
func TestOneNodeConcurrentPutsShareOneScript(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	stores := group(t, addrs, 2, Options{})
	a, b := stores[0], stores[1]
	events := listening(t, a, b)
	// B's consumers wait on both topics: its wake-ups are published.
	if err := b.MarkWaiting(t.Context(), []string{"t", "u"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	steadySeqs(t, a)
	commits := countCommits(a)
	due := delayq.TruncMilli(time.Now().Add(time.Hour))
	delayed := readyIn("d1", "t")
	delayed.State, delayed.Due = delayq.StateDelayed, due

	release := pauseWrites(t, addrs[0])
	p := &linedPuts{t: t, s: a}
	hold := readyIn("hold", "t")
	p.hold(hold)
	lined := [][]*delayq.Job{
		{readyIn("r1", "t")}, {readyIn("r2", "t")}, {readyIn("u1", "u")}, {delayed},
		{readyIn("m1", "u"), readyIn("m2", "u")},
	}
	for i, jobs := range lined {
		p.start(t.Context(), i+1, jobs...)
	}
	release()
	p.wg.Wait()
	for i := range p.errs {
		if err := p.err(i); err != nil {
			t.Fatalf("put %d = %v", i, err)
		}
	}
	if n := commits.Load(); n != 2 {
		t.Errorf("%d write round trips for a put in flight and %d lined up behind it, want 2", n, len(lined))
	}
	seqsInOrder(t, a, hold, lined[0][0], lined[1][0], lined[2][0], delayed, lined[4][0], lined[4][1])
	// B hears the group's wake-ups: its due time, and one count per
	// topic (after the held put's own t 1).
	hears(t, events, "t 2", "u 3", "due "+strconv.FormatInt(due.UnixMilli(), 10))
}

// liveAndStale puts the live jobs "live" and "live2" in topic t and
// leaves a stale claim of id "old" in t (its put died before its insert,
// an hour ago).
func liveAndStale(t *testing.T, s *Store) {
	t.Helper()
	for _, id := range []string{"live", "live2"} {
		if err := s.Put(t.Context(), []*delayq.Job{readyIn(id, "t")}); err != nil {
			t.Fatal(err)
		}
	}
	stale := "t|" + strconv.FormatInt(time.Now().Add(-time.Hour).UnixMilli(), 10) + "|0123456789abcdef"
	if err := s.c.Do(t.Context(), s.c.B().Set().Key(s.k.claim("old")).Value(stale).Build()).Error(); err != nil {
		t.Fatal(err)
	}
}

// seqsInOrder checks that jobs, as their puts left them (PutFresh
// gives them ids of its own), have growing seqs in the store.
func seqsInOrder(t *testing.T, s *Store, jobs ...*delayq.Job) {
	t.Helper()
	var last uint64
	for _, put := range jobs {
		j := ok(s.Get(t.Context(), delayq.Ref{ID: put.ID}))(t)
		if j.Seq <= last {
			t.Errorf("%s has seq %d, not after the put before it (%d)", put.ID, j.Seq, last)
		}
		last = j.Seq
	}
}

// hears waits until every event of want ("topic count", or "due <unix
// ms>") came out of events, for up to 5 s.
func hears(t *testing.T, events <-chan store.Event, want ...string) {
	t.Helper()
	left := map[string]bool{}
	for _, w := range want {
		left[w] = true
	}
	var heard []string
	timeout := time.After(5 * time.Second)
	for len(left) > 0 {
		select {
		case e := <-events:
			h := e.Topic + " " + strconv.Itoa(e.Count)
			if !e.Due.IsZero() {
				h = "due " + strconv.FormatInt(e.Due.UnixMilli(), 10)
			}
			heard = append(heard, h)
			delete(left, h)
		case <-timeout:
			t.Fatalf("B heard %v; never %v", heard, left)
		}
	}
}

// putAnswered checks put i's answer err: nil when taken is "", else an
// ExistsError for the id taken, whose job is ready.
func putAnswered(t *testing.T, i int, jobs []*delayq.Job, taken string, err error) {
	t.Helper()
	var ee *delayq.ExistsError
	switch {
	case taken == "" && err != nil:
		t.Errorf("put %d (%s) = %v, want nil", i, jobs[0].ID, err)
	case taken != "" && !errors.As(err, &ee):
		t.Errorf("put %d (%s) = %v, want an ExistsError", i, jobs[0].ID, err)
	case taken != "" && (ee.ID != taken || ee.State != delayq.StateReady):
		t.Errorf("put %d: ExistsError{%q, %q}, want {%q, ready}", i, ee.ID, ee.State, taken)
	}
}

// TestOneNodePutGroupAnswersEachPut: in one group every put gets its own
// answer, as it would alone: a live id fails only its own put, with its
// state; a put of several jobs with one live id stores none of them; an
// id with a stale claim goes down the full path and is stored; two puts
// of one id go in separate groups, and the second is told the first one's
// job exists; a put whose caller gives up in line is never written. The
// other puts share one script call.
func TestOneNodePutGroupAnswersEachPut(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	s := openStore(t, addrs, Options{})
	defer s.Close()
	ctx := t.Context()
	liveAndStale(t, s)
	steadySeqs(t, s)
	commits := countCommits(s)

	release := pauseWrites(t, addrs[0])
	p := &linedPuts{t: t, s: s}
	p.hold(readyIn("hold", "t"))
	cases := []struct {
		jobs  []*delayq.Job
		taken string // the id the put must fail on, "" for none
	}{
		{jobs: []*delayq.Job{readyIn("a", "t")}},
		{jobs: []*delayq.Job{readyIn("live", "t")}, taken: "live"},
		{jobs: []*delayq.Job{readyIn("b", "t"), readyIn("live2", "t")}, taken: "live2"},
		{jobs: []*delayq.Job{readyIn("c", "u")}},
		{jobs: []*delayq.Job{readyIn("old", "t")}},
		{jobs: []*delayq.Job{readyIn("c", "t")}, taken: "c"}, // a second group
	}
	at := make([]int, len(cases))
	for i, c := range cases[:5] {
		at[i] = p.start(ctx, i+1, c.jobs...)
	}
	quitCtx, cancel := context.WithCancel(ctx)
	quit := p.start(quitCtx, 6, readyIn("quit", "t"))
	at[5] = p.start(ctx, 7, cases[5].jobs...)
	cancel()
	waitFor(t, 10*time.Second, "the cancelled put to leave the line", func() bool { return s.putLine().Waiting() == 6 })
	release()
	p.wg.Wait()
	writes := commits.Load()

	for i, c := range cases {
		putAnswered(t, i, c.jobs, c.taken, p.err(at[i]))
	}
	if err := p.err(quit); !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled put = %v, want context.Canceled", err)
	}
	for id, want := range map[string]error{"a": nil, "old": nil, "c": nil, "b": delayq.ErrNotFound, "quit": delayq.ErrNotFound} {
		if _, err := s.Get(ctx, delayq.Ref{ID: id}); !errors.Is(err, want) {
			t.Errorf("Get(%s) = %v, want %v", id, err, want)
		}
	}
	if j := ok(s.Get(ctx, delayq.Ref{ID: "c"}))(t); j.Topic != "u" {
		t.Errorf("Get(c) is in topic %s, want u (the first put of c)", j.Topic)
	}
	// The held put; one script for a, live, b+live2, c (u) and old's
	// check; old's full path (its index pipeline and its insert); c (t)
	// in the next group.
	if n := writes; n != 5 {
		t.Errorf("%d write round trips, want 5 (the lined-up puts but old's full path and the second c in one)", n)
	}
	topics := ok(s.Topics(ctx))(t)
	got := map[string]int{}
	for _, tp := range topics {
		got[tp.Name] = tp.Ready
	}
	if got["t"] != 5 || got["u"] != 1 { // t: live, live2, hold, a, old
		t.Errorf("ready jobs by topic = %v, want t 5, u 1", got)
	}
}

var _ store.Store = (*Store)(nil)
