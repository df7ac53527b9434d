package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// pauseCluster makes every node of s's Cluster hold writes (pauseWrites)
// until the returned release runs.
func pauseCluster(t *testing.T, s *Store) (release func()) {
	t.Helper()
	var releases []func()
	for addr := range s.c.Nodes() {
		releases = append(releases, pauseWrites(t, addr))
	}
	return func() {
		for _, r := range releases {
			r()
		}
	}
}

// quietLeases keeps a store's lease loop from running during a test (a
// round every 20 minutes), so the scripts the test counts are its puts'.
var quietLeases = Options{LeaseTTL: time.Hour}

// TestClusterConcurrentPutsShareOneScript: on a Cluster the Put calls
// (producers' ids; PutFresh has its master's line, masterput.go) of a
// topic that arrive while another put of it is in flight go to Redis
// together: one insert script for the whole group, with seqs in their
// order of arrival, and one wake-up (one count, one due time) for the
// group. A put of another topic does not wait for them. Before, each put
// ran its own insert script and published its own wake-ups.
func TestClusterConcurrentPutsShareOneScript(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")
	stores := group(t, addrs, 2, quietLeases)
	a, b := stores[0], stores[1]
	events := listening(t, a, b)
	// B's consumers wait on both topics: its wake-ups are published.
	if err := b.MarkWaiting(t.Context(), []string{"t", "u"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	// Every node that holds t or u has the insert script from here on
	// (a node without it answers the first EVALSHA with NOSCRIPT).
	for _, j := range []*delayq.Job{readyIn("warm-t", "t"), readyIn("warm-u", "u")} {
		if err := a.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	steadySeqs(t, a)
	due := delayq.TruncMilli(time.Now().Add(time.Hour))
	delayed := readyIn("d1", "t")
	delayed.State, delayed.Due = delayq.StateDelayed, due
	scripts := clusterCalls(t, a, "evalsha")

	release := pauseCluster(t, a)
	p := &linedPuts{t: t, s: a}
	// Two groups of a topic are in flight at a time: these four fill
	// t's and u's slots (u's puts are not behind t's).
	held := []*delayq.Job{readyIn("hold", "t"), readyIn("hold2", "t"), readyIn("u1", "u"), readyIn("u2", "u")}
	for _, j := range held {
		p.hold(j)
	}
	lined := [][]*delayq.Job{{readyIn("r1", "t")}, {readyIn("r2", "t")}, {delayed}, {readyIn("r3", "t")}}
	for i, jobs := range lined {
		p.start(ctx, i+1, jobs...)
	}
	m := []*delayq.Job{readyIn("m1", "u"), readyIn("m2", "u")}
	p.start(ctx, 1, m...)
	release()
	p.wg.Wait()
	for i := range p.errs {
		if err := p.err(i); err != nil {
			t.Fatalf("put %d = %v", i, err)
		}
	}
	// A claim script per id (10), the held puts' inserts, then one for
	// t's four and one for u's.
	if n := clusterCalls(t, a, "evalsha") - scripts; n != 16 {
		t.Errorf("%d scripts for 4 puts in flight and 5 lined up behind them (10 ids), want 16: 10 claims and 6 inserts", n)
	}
	seqsInOrder(t, a, held[0], held[1], lined[0][0], lined[1][0], delayed, lined[3][0])
	seqsInOrder(t, a, held[2], held[3], m[0], m[1])
	// B hears the group's wake-ups: one count and the due time (after
	// the held puts' own t 1 and u 1).
	hears(t, events, "t 3", "u 2", "due "+strconv.FormatInt(due.UnixMilli(), 10))
}

// TestClusterPutGroupAnswersEachPut: in one group on a Cluster every put
// gets its own answer, as it would alone: an id another put holds fails
// only its own put (with the live job's state), a put of several jobs
// with one such id stores none of them; an id with a stale claim is
// taken over and stored; two puts of
// one id go in separate groups, and the second is told the first one's
// job exists; a put whose caller gives up in line is never written. The
// others share one index pipeline and one insert script. A topic whose
// insert script fails fails its own puts only, which keep their claims
// (their jobs may be live, as after any failed insert).
func TestClusterPutGroupAnswersEachPut(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")
	s := openStore(t, addrs, quietLeases)
	defer s.Close()
	ctx := t.Context()
	// One group of t in flight at a time (a Cluster writes two), so the
	// second put of c is written after the first one's group.
	s.putLineOf("t").InFlight = 1
	liveAndStale(t, s)
	// A topic whose insert script fails: its id index is not a hash.
	if err := s.c.Do(ctx, s.c.B().Set().Key(s.k.topic("bad").idsKey()).Value("x").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	steadySeqs(t, s)
	commits := countCommits(s)

	release := pauseCluster(t, s)
	p := &linedPuts{t: t, s: s}
	p.hold(readyIn("hold", "t"))
	other := p.hold(readyIn("d", "u"))
	bad := p.hold(readyIn("x", "bad"))
	cases := []struct {
		jobs  []*delayq.Job
		taken string // the id the put must fail on, "" for none
	}{
		{jobs: []*delayq.Job{readyIn("a", "t")}},
		{jobs: []*delayq.Job{readyIn("live", "t")}, taken: "live"},
		{jobs: []*delayq.Job{readyIn("b", "t"), readyIn("live2", "t")}, taken: "live2"},
		{jobs: []*delayq.Job{readyIn("c", "t")}},
		{jobs: []*delayq.Job{readyIn("old", "t")}},
		{jobs: []*delayq.Job{readyIn("c", "t")}, taken: "c"}, // a second group
	}
	at := make([]int, len(cases))
	last := len(cases) - 1
	for i, c := range cases[:last] {
		at[i] = p.start(ctx, i+1, c.jobs...)
	}
	quitCtx, cancel := context.WithCancel(ctx)
	quit := p.start(quitCtx, last+1, readyIn("quit", "t"))
	at[last] = p.start(ctx, last+2, cases[last].jobs...)
	cancel()
	waitFor(t, 10*time.Second, "the cancelled put to leave the line", func() bool { return s.putLineOf("t").Waiting() == last+1 })
	release()
	p.wg.Wait()
	writes := commits.Load()

	for i, c := range cases {
		putAnswered(t, i, c.jobs, c.taken, p.err(at[i]))
	}

	if err := p.err(other); err != nil {
		t.Errorf("the put of another topic = %v, want nil", err)
	}
	if err := p.err(bad); !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("the put whose insert script fails = %v, want ErrUnavailable", err)
	}
	if err := p.err(quit); !errors.Is(err, context.Canceled) {
		t.Errorf("the cancelled put = %v, want context.Canceled", err)
	}
	for id, want := range map[string]error{"a": nil, "old": nil, "c": nil, "d": nil,
		"b": delayq.ErrNotFound, "quit": delayq.ErrNotFound} {
		if _, err := s.Get(ctx, delayq.Ref{ID: id}); !errors.Is(err, want) {
			t.Errorf("Get(%s) = %v, want %v", id, err, want)
		}
	}
	// Claims: kept for the put whose insert failed (as alone), gone for
	// those refused (b's) and never made for the one that gave up.
	for id, want := range map[string]int64{"x": 1, "b": 0, "quit": 0} {
		if n := ok(s.c.Do(ctx, s.c.B().Exists().Key(s.k.claim(id)).Build()).AsInt64())(t); n != want {
			t.Errorf("claim of %s: %d keys, want %d", id, n, want)
		}
	}
	// The held puts of t and u (an index pipeline and an insert each),
	// bad's index pipeline (its insert failed: no commit), one index
	// pipeline and one insert script for a, c and old; nothing for
	// the second c, refused at its claim.
	if writes != 7 {
		t.Errorf("%d write round trips, want 7 (2 for each held put, 1 for the failed one, 2 for the group of 5)", writes)
	}
	got := map[string]int{}
	for _, tp := range ok(s.Topics(ctx))(t) {
		got[tp.Name] = tp.Ready
	}
	if got["t"] != 6 || got["u"] != 1 { // t: live, live2, hold, a, c, old
		t.Errorf("ready jobs by topic = %v, want t 6, u 1", got)
	}
}
