package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// topicsOn names, for each of the wanted masters' slots, topics "<stem>N"
// that s's slot map puts on master m (on[m]) or on another one (off).
func topicsOn(t *testing.T, s *Store, m string, on, off int) (onM, offM []string) {
	t.Helper()
	for i := 0; len(onM) < on || len(offM) < off; i++ {
		if i > 10000 {
			t.Fatalf("no topics for master %s", m)
		}
		topic := "p" + strconv.Itoa(i)
		owner := s.masterOfKey(s.k.topicBase(topic))
		if owner == "" {
			t.Fatal("the slot map names no master")
		}
		if owner == m && len(onM) < on {
			onM = append(onM, topic)
		} else if owner != m && len(offM) < off {
			offM = append(offM, topic)
		}
	}
	return onM, offM
}

// firstMaster is the master of topic "p0" by s's slot map.
func firstMaster(t *testing.T, s *Store) string {
	t.Helper()
	m := s.masterOfKey(s.k.topicBase("p0"))
	if m == "" {
		t.Fatal("the slot map names no master")
	}
	return m
}

// seqMasterTopics opens a store on the test Cluster whose seq block does
// not age (steadySeqs) and names a master m, a topic on m and one on
// another master.
func seqMasterTopics(t *testing.T) (s *Store, m string, on, off []string) {
	t.Helper()
	s = openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER"), quietLeases)
	t.Cleanup(func() { s.Close() })
	steadySeqs(t, s)
	m = firstMaster(t, s)
	on, off = topicsOn(t, s, m, 1, 1)
	return s, m, on, off
}

// TestClusterFreshPutIsOneRoundTrip: on a Cluster a PutFresh of ready
// jobs of a registered topic is one script on the topic's master, which
// writes the seq entries too: the instance gives the put seqs whose seq
// group's shard is on that master (takeSeqsOn), whichever master it is.
// Only when the seqs' shards are elsewhere (here: the map of the seq
// groups is wrong) do the seq entries go first, in one more round trip. Before,
// every put was the index pipeline (the seq entries) and then the insert
// script: two round trips to two masters. Either way the job is found by
// its id and by its seq, by another instance too (which has no memory
// of the seq).
func TestClusterFreshPutIsOneRoundTrip(t *testing.T) {
	s, _, on, off := seqMasterTopics(t)
	other := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER"), Options{Prefix: s.opt.Prefix, InstanceID: "other"})
	defer other.Close()
	_, more := topicsOn(t, s, s.masterOfKey(s.k.topicBase(off[0])), 0, 1) // a topic on the third master
	ctx := t.Context()
	var last uint64
	for _, c := range []struct {
		topic       string
		writes      int64
		staleGroups bool
	}{{on[0], 1, false}, {off[0], 1, false}, {more[0], 1, false}, {on[0], 2, true}} {
		if c.staleGroups {
			// The map of the seq groups names, for each, a master that is
			// not its own, the topic's for those on another one: the seqs
			// taken for the topic's master are all in shards elsewhere.
			m := s.masterOfKey(s.k.topicBase(c.topic))
			lie := new([seqGroups]string)
			for g, owner := range s.seqGroupMasters() {
				if lie[g] = "elsewhere"; owner != m {
					lie[g] = m
				}
			}
			setSeqGroups(s, lie)
		}
		// The first put registers the topic (and loads the script on its
		// master); the second is the one measured.
		for i := range 2 {
			j := readyIn(nonce(), c.topic)
			commits := countCommits(s)
			if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
				t.Fatal(err)
			}
			n := commits.Load()
			s.ObserveCommits(nil)
			if j.Seq <= last {
				t.Errorf("seq %d after %d: put order is not seq order", j.Seq, last)
			}
			last = j.Seq
			if i == 0 {
				continue
			}
			if n != c.writes {
				t.Errorf("a put of %s (map of the seq groups stale: %v): %d write round trips, want %d", c.topic, c.staleGroups, n, c.writes)
			}
			master, shard := s.masterOfKey(s.k.topicBase(c.topic)), s.k.seqShard(j.Seq)
			if (s.masterOfKey(shard) == master) == c.staleGroups {
				t.Errorf("seq %d of a put of %s: its shard %s on the topic's master %s: %v, want %v", j.Seq, c.topic, shard, master, !c.staleGroups, c.staleGroups)
			}
			if got := ok(s.c.Do(ctx, s.c.B().Hget().Key(shard).Field(strconv.FormatUint(j.Seq, 10)).Build()).ToString())(t); got != c.topic {
				t.Errorf("entry of seq %d in %s = %q, want %q", j.Seq, shard, got, c.topic)
			}
			for _, ref := range []delayq.Ref{{ID: j.ID}, {Seq: j.Seq}} {
				got, err := other.Get(ctx, ref)
				if err != nil || got.ID != j.ID || got.Topic != c.topic {
					t.Errorf("Get(%+v) by another instance = %v, %v; want the job put", ref, got, err)
				}
			}
		}
	}
	if !s.k.tagged || s.k.tagsFrom == 0 || s.k.tagsFrom > last {
		t.Errorf("keys: tagged %v from %d; want the seqs put (up to %d) in tagged shards", s.k.tagged, s.k.tagsFrom, last)
	}
}

// setSeqGroups gives s's slot map groups as the masters of the seq
// groups, and marks the map fresh so that it is not read again during
// the test.
func setSeqGroups(s *Store, groups *[seqGroups]string) {
	s.slots.mu.Lock()
	s.slots.groups, s.slots.at = groups, time.Now()
	s.slots.mu.Unlock()
}

// TestClusterTakeSeqsOn: the seqs a group of puts on a master takes are
// ascending from call to call, each in a seq group whose hash is on that
// master; when no group is on the master, it takes the next seqs of the
// block and passes over none.
func TestClusterTakeSeqsOn(t *testing.T) {
	s, m, _, _ := seqMasterTopics(t)
	groups := s.seqGroupMasters()
	if groups == nil {
		t.Fatal("no map of the seq groups")
	}
	var last uint64
	for range 10 {
		for _, q := range ok(s.takeSeqsOn(t.Context(), 3, m))(t) {
			if q <= last {
				t.Fatalf("seq %d after %d", q, last)
			}
			if groups[seqGroup(q)] != m || s.masterOfKey(s.k.seqShard(q)) != m {
				t.Errorf("seq %d: group %d on %s, its hash %s on %s; want both on %s", q, seqGroup(q), groups[seqGroup(q)], s.k.seqShard(q), s.masterOfKey(s.k.seqShard(q)), m)
			}
			last = q
		}
	}
	setSeqGroups(s, new([seqGroups]string)) // no group anywhere
	seqs := ok(s.takeSeqsOn(t.Context(), 5, m))(t)
	for i, q := range seqs {
		if q != seqs[0]+uint64(i) || q <= last {
			t.Fatalf("seqs with no group on the master = %v after %d, want the next five in a row", seqs, last)
		}
	}
}

// TestClusterFreshPutsShareOneScriptPerMaster: on a Cluster the PutFresh
// calls that arrive while a group of their master is in flight go to
// Redis together, whatever their topics on that master: one script for
// the group, the seqs in order of arrival, each topic's ready count
// published once. A put on another master does not wait for them.
func TestClusterFreshPutsShareOneScriptPerMaster(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")
	stores := group(t, addrs, 2, quietLeases)
	a, b := stores[0], stores[1]
	ctx := t.Context()
	steadySeqs(t, a)
	m := firstMaster(t, a)
	on, off := topicsOn(t, a, m, 2, 1)
	x, y, z := on[0], on[1], off[0]
	events := listening(t, a, b)
	if err := b.MarkWaiting(ctx, []string{x, y, z}, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{x, y, z} { // registered, and the script loaded on both masters
		if err := a.PutFresh(ctx, []*delayq.Job{readyIn(nonce(), topic)}); err != nil {
			t.Fatal(err)
		}
	}
	hears(t, events, x+" 1", y+" 1", z+" 1")
	due := delayq.TruncMilli(time.Now().Add(time.Hour))
	delayed := readyIn(nonce(), y)
	delayed.State, delayed.Due = delayq.StateDelayed, due
	scripts := clusterCalls(t, a, "evalsha")

	release := pauseCluster(t, a)
	p := &linedPuts{t: t, s: a}
	held := []*delayq.Job{readyIn(nonce(), x)}
	for _, j := range held {
		p.holdBy(true, j)
	}
	lined := [][]*delayq.Job{{readyIn(nonce(), x)}, {readyIn(nonce(), y)}, {delayed}, {readyIn(nonce(), x), readyIn(nonce(), x)}}
	for i, jobs := range lined {
		p.startBy(ctx, i+1, true, jobs...)
	}
	other := readyIn(nonce(), z)
	p.holdBy(true, other) // in flight at once: its master's line is free
	release()
	p.wg.Wait()
	for i := range p.errs {
		if err := p.err(i); err != nil {
			t.Fatalf("put %d = %v", i, err)
		}
	}
	// The held one, the other master's, and one for the four lined up.
	if n := clusterCalls(t, a, "evalsha") - scripts; n != 3 {
		t.Errorf("%d scripts for 2 puts in flight and 4 of two topics lined up behind them, want 3", n)
	}
	seqsInOrder(t, a, held[0], lined[0][0], lined[1][0], delayed, lined[3][0], lined[3][1])
	hears(t, events, x+" 3", y+" 1", z+" 1", "due "+strconv.FormatInt(due.UnixMilli(), 10))
	got := map[string]int{}
	for _, tp := range ok(a.Topics(ctx))(t) {
		got[tp.Name] = tp.Ready + tp.Delayed
	}
	if got[x] != 5 || got[y] != 3 || got[z] != 2 {
		t.Errorf("jobs by topic = %v, want %s 5, %s 3, %s 2", got, x, y, z)
	}
}

// TestClusterMasterPutWithAStaleSlotMap: a group whose slot map was
// wrong (a topic it put on the master is on another one, as after a
// resharding) is refused by Redis at that topic, and then written topic
// by topic: every call is answered nil, every job is in once and found,
// and the map is to be read again.
func TestClusterMasterPutWithAStaleSlotMap(t *testing.T) {
	s, m, on, off := seqMasterTopics(t)
	ctx := t.Context()
	for _, order := range [][]string{{on[0], off[0]}, {off[0], on[0]}} {
		var calls []*putCall
		var jobs []*delayq.Job
		for _, topic := range order {
			j := readyIn(nonce(), topic)
			jobs = append(jobs, j)
			calls = append(calls, &putCall{jobs: []*delayq.Job{j}, fresh: true})
		}
		s.writeMasterPuts(ctx, m, calls)
		for i, c := range calls {
			if c.err != nil {
				t.Fatalf("order %v: call %d = %v", order, i, c.err)
			}
		}
		for _, j := range jobs {
			got, err := s.Get(ctx, delayq.Ref{ID: j.ID})
			if err != nil || got.Topic != j.Topic || got.State != delayq.StateReady {
				t.Errorf("order %v: Get(%s) = %v, %v; want it ready in %s", order, j.ID, got, err, j.Topic)
			}
		}
		s.slots.mu.Lock()
		stale := s.slots.at.IsZero() || s.slots.refreshing
		s.slots.at = time.Now() // for the next round
		s.slots.mu.Unlock()
		if !stale {
			t.Errorf("order %v: the slot map was not marked to be read again", order)
		}
	}
	got := map[string]int{}
	for _, tp := range ok(s.Topics(ctx))(t) {
		got[tp.Name] = tp.Ready
	}
	if got[on[0]] != 2 || got[off[0]] != 2 {
		t.Errorf("ready jobs by topic = %v, want 2 each (no job twice)", got)
	}
}
