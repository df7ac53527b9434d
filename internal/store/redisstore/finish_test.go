package redisstore

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestFinishesShareOneScript: finishes that arrive while one is in
// flight are written together, one script for the group (one ZREM of the
// reserved index for all of them, read in INFO commandstats), and each is
// answered on its own: a finish with a reservation that no longer holds
// its job fails alone with ErrNotReserved, a second finish of a job the
// group ends fails alone with ErrNotFound, and every other job ends
// (retained with its history, or gone without retention). On one node
// and on a Cluster; on a Cluster the group's global steps then take one
// compare-and-set per id claim (EVALSHA calls), not two scripts per
// call, and a retained job's seq entry stays in its shard (no script
// and no key of its own for it).
func TestFinishesShareOneScript(t *testing.T) {
	eachPrivateRedis(t, testFinishesShareOneScript)
}

func testFinishesShareOneScript(t *testing.T, addrs []string) {
	// Another connection pauses Redis's writes while the finishes queue
	// up, and reads the counters.
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, keep := range []time.Duration{time.Hour, 0} {
		t.Run("retain="+keep.String(), func(t *testing.T) {
			// Leases renewed once an hour: no script but the test's runs
			// while it counts them.
			s := openStore(t, addrs, Options{Volatile: true, Retention: store.Retention{For: keep}, LeaseTTL: time.Hour})
			defer s.Close()
			ctx := t.Context()
			const n = 24
			var jobs []*delayq.Job
			for i := range n + 3 {
				jobs = append(jobs, hjob(fmt.Sprintf("f%d", i), "t"))
			}
			if err := s.Put(ctx, jobs); err != nil {
				t.Fatal(err)
			}
			got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: n + 3, Now: time.Now(), By: "w"}))(t)
			if len(got) != n+3 {
				t.Fatalf("Reserve = %d jobs, want %d", len(got), n+3)
			}
			// The last three warm up: one finish alone and a group of
			// two load every script a finish runs, so none is loaded
			// (EVAL) while the test counts.
			warm := got[n:]
			got = got[:n]
			finish := func(j *delayq.Job) *finishCall {
				ref := delayq.Ref{Seq: j.Seq, Reservation: j.Reservation}
				return &finishCall{t: ok(s.resolve(ctx, ref))(t), res: j.Reservation, now: msString(time.Now()), ref: ref}
			}
			s.writeFinishes(ctx, []*finishCall{finish(warm[0])})
			s.writeFinishes(ctx, []*finishCall{finish(warm[1]), finish(warm[2])})
			// The calls, all by seq (this instance reserved them, so their
			// topics are known without asking Redis, whose writes are
			// paused): each job finished with its reservation, then a
			// stale reservation of job 1 and a second finish of job 2.
			type call struct {
				ref  delayq.Ref
				want error
			}
			var calls []call
			for _, j := range got {
				calls = append(calls, call{ref: delayq.Ref{Seq: j.Seq, Reservation: j.Reservation}})
			}
			calls = append(calls, call{ref: delayq.Ref{Seq: got[1].Seq, Reservation: got[1].Reservation + "0"}, want: delayq.ErrNotReserved},
				call{ref: delayq.Ref{Seq: got[2].Seq, Reservation: got[2].Reservation}, want: delayq.ErrNotFound})
			// Job 1's stale finish must come before its own in the group.
			calls[1], calls[n] = calls[n], calls[1]
			calls[1].want, calls[n].want = delayq.ErrNotReserved, nil

			do := func(c rueidis.Completed) {
				t.Helper()
				if err := admin.Do(ctx, c).Error(); err != nil {
					t.Fatal(err)
				}
			}
			do(admin.B().ConfigResetstat().Build())
			do(admin.B().ClientPause().Timeout(10000).Write().Build())
			defer admin.Do(ctx, admin.B().ClientUnpause().Build())
			errs := make([]error, len(calls))
			var wg sync.WaitGroup
			start := func(i int) {
				wg.Go(func() {
					_, errs[i] = s.Delete(ctx, store.DeleteParams{Ref: calls[i].ref, Now: time.Now()})
				})
			}
			line := s.finishLine()
			// The first goes alone and waits in Redis; the rest queue
			// behind it, in order.
			start(0)
			waitFor(t, 10*time.Second, "the first finish in flight", func() bool { return line.Writing() == 1 })
			for i := 1; i < len(calls); i++ {
				start(i)
				waitFor(t, 10*time.Second, "the finishes to queue", func() bool { return line.Waiting() == i })
			}
			do(admin.B().ClientUnpause().Build())
			wg.Wait()
			for i, c := range calls {
				if (c.want == nil && errs[i] != nil) || (c.want != nil && !errors.Is(errs[i], c.want)) {
					t.Errorf("finish %d (%v) = %v, want %v", i, c.ref, errs[i], c.want)
				}
			}
			stats := ok(admin.Do(ctx, admin.B().Info().Section("commandstats").Build()).ToString())(t)
			if zrem := cmdCalls(stats, "zrem"); zrem != 2 {
				t.Errorf("ZREM calls = %d, want 2: the first finish alone, then one for the group of %d", zrem, len(calls)-1)
			}
			if !s.oneNode {
				// The topic's scripts (the first finish alone, then the
				// group) and an id claim's compare-and-set per job; no
				// script on the seq shards: a retained job's entry stays
				// in its shard, one that is not is dropped by an HDEL.
				if evalsha, want := cmdCalls(stats, "evalsha"), 2+n; evalsha != want {
					t.Errorf("EVALSHA calls = %d, want %d: the topic's two scripts and %d claims", evalsha, want, n)
				}
				// per job its record, its retained claim and its id's
				// P:{t}:r:<id>, and per script the topic's clock; no key
				// for its seq
				if set := cmdCalls(stats, "set"); keep > 0 && set != 3*n+2 {
					t.Errorf("SET calls = %d, want %d: per job its record, retained claim and id key, the clock per script", set, 3*n+2)
				}
			}
			for _, j := range got {
				g, err := s.Get(ctx, delayq.Ref{Seq: j.Seq})
				switch {
				case keep == 0 && !errors.Is(err, delayq.ErrNotFound):
					t.Errorf("Get(%s) without retention = %+v, %v; want ErrNotFound", j.ID, g, err)
				case keep > 0 && (err != nil || g.State != delayq.StateFinished || len(g.History) != 1 || g.History[0].Outcome != delayq.OutcomeFinished):
					t.Errorf("Get(%s) = %+v, %v; want it finished with its attempt", j.ID, g, err)
				}
			}
			if keep > 0 {
				l := ok(s.List(ctx, store.ListParams{Topic: "t", State: delayq.StateFinished}))(t)
				if len(l.Jobs) != n+3 {
					t.Errorf("List(finished) = %d jobs, want %d", len(l.Jobs), n+3)
				}
				var ex *delayq.ExistsError
				if err := s.Put(ctx, []*delayq.Job{hjob(got[3].ID, "other")}); !errors.As(err, &ex) || ex.State != delayq.StateFinished {
					t.Errorf("Put of a finished id = %v, want ExistsError{finished}", err)
				}
			} else {
				waitNoKeys(t, s, "the finished jobs'")
			}
		})
	}
}

// TestFinishGroupWithAnUnreadableRecord: a group whose script fails on a
// record it cannot read wrote nothing (it reads every record before it
// writes), and is written again one call at a time, so only the call of
// that record fails. On one node and on a Cluster.
func TestFinishGroupWithAnUnreadableRecord(t *testing.T) {
	eachRedis(t, testFinishGroupWithAnUnreadableRecord)
}

func testFinishGroupWithAnUnreadableRecord(t *testing.T, addrs []string) {
	s := openStore(t, addrs, Options{Retention: store.Retention{For: time.Hour}})
	defer s.Close()
	ctx := t.Context()
	jobs := []*delayq.Job{hjob("a", "t"), hjob("b", "t"), hjob("c", "t")}
	if err := s.Put(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 3, Now: time.Now(), By: "w"}))(t)
	// b's record cut short: MessagePack that cannot be unpacked.
	key := s.k.topic("t")[0] + strconv.FormatUint(got[1].Seq, 10)
	raw := ok(s.c.Do(ctx, s.c.B().Get().Key(key).Build()).ToString())(t)
	if err := s.c.Do(ctx, s.c.B().Set().Key(key).Value(raw[:len(raw)/2]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	var calls []*finishCall
	for i, j := range got {
		ref := delayq.Ref{Seq: j.Seq, Reservation: j.Reservation}
		if i == 2 {
			ref = delayq.Ref{ID: j.ID, Reservation: j.Reservation} // by id: the seq its claim names
		}
		tg := ok(s.resolve(ctx, ref))(t)
		calls = append(calls, &finishCall{t: tg, res: j.Reservation, now: msString(time.Now()), ref: ref})
	}
	s.writeFinishes(ctx, calls)
	for i, c := range calls {
		if (i == 1) != (c.err != nil) {
			t.Errorf("finish of %s = %v; want an error for b only", got[i].ID, c.err)
		}
	}
	for _, i := range []int{0, 2} {
		if g := ok(s.Get(ctx, delayq.Ref{ID: got[i].ID}))(t); g.State != delayq.StateFinished || len(g.History) != 1 {
			t.Errorf("Get(%s) = %+v, want it finished once", got[i].ID, g)
		}
	}
}

// privateRedis starts a redis-server of the test's own: its command
// counters and CLIENT PAUSE are the test's alone (the shared test Redis
// serves other packages' tests at the same time).
func privateRedis(t *testing.T) []string {
	_, port := startRedis(t, 0)
	return []string{fmt.Sprintf("127.0.0.1:%d", port)}
}

// eachPrivateRedis runs test against a Redis of its own and a Cluster
// of its own (privateRedis, privateCluster).
func eachPrivateRedis(t *testing.T, test func(t *testing.T, addrs []string)) {
	t.Run("one-node", func(t *testing.T) { test(t, privateRedis(t)) })
	t.Run("cluster", func(t *testing.T) { test(t, privateCluster(t)) })
}

// privateCluster starts a Redis Cluster of the test's own: one master
// that holds every slot. To a store it is a Cluster (no script names
// another slot's keys, the global steps follow the topics' scripts,
// wake-ups go over sharded pub/sub), and its command counters and
// CLIENT PAUSE are the test's alone. The shared 3-master Cluster runs
// the conformance suite.
func privateCluster(t *testing.T) []string {
	l, err := net.Listen("tcp", "127.0.0.1:0") // the cluster bus's port
	if err != nil {
		t.Fatal(err)
	}
	bus := l.Addr().(*net.TCPAddr).Port
	l.Close()
	_, port := startRedis(t, 0, "--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
		"--cluster-config-file", filepath.Join(t.TempDir(), "nodes.conf"))
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, DisableCache: true, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := t.Context()
	if err := admin.Do(ctx, admin.B().ClusterAddslotsrange().StartSlotEndSlot().StartSlotEndSlot(0, clusterSlots-1).Build()).Error(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE: %v", err)
	}
	waitFor(t, 10*time.Second, "the private Cluster's state ok", func() bool {
		info, err := admin.Do(ctx, admin.B().ClusterInfo().Build()).ToString()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	return []string{addr}
}

// cmdCalls is the calls of cmd in an INFO commandstats answer.
func cmdCalls(stats, cmd string) int {
	for _, line := range strings.Split(stats, "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":"); ok {
			n, _ := strconv.Atoi(infoStat(rest, "calls"))
			return n
		}
	}
	return 0
}

// TestReservesShareOneScript: single-topic reserves that arrive while
// one is in flight are written together, one script for the group (one
// ZREM of the ready index for all of them, read in INFO commandstats),
// and each is served as if alone, in order: up to its own Max of the
// best jobs the calls before it left, acted at its own Now, by its own
// name, and its jobs' TTRs begin at its own Now rounded up
// (store.BeginTTR), not at the Now of the call that led the group. The
// topic's timer bucket is marked once per group (one ZADD of the
// reserved index and one of the bucket; on a Cluster not at all when the
// entry is known to be earlier already), and an instance alone
// publishes no deadline (nobody else would hear it). On one node and on
// a Cluster.
func TestReservesShareOneScript(t *testing.T) {
	eachPrivateRedis(t, testReservesShareOneScript)
}

func testReservesShareOneScript(t *testing.T, addrs []string) {
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	// Leases renewed (and heartbeats written) once an hour: no ZADD but
	// the test's runs while it counts them.
	s := openStore(t, addrs, Options{Volatile: true, Retention: store.Retention{For: time.Hour}, LeaseTTL: time.Hour})
	defer s.Close()
	waitFor(t, 10*time.Second, "the store's subscriptions confirmed", func() bool { return s.fan.own() == "1" })
	ctx := t.Context()
	const n = 10
	var jobs []*delayq.Job
	for i := range n {
		j := hjob(fmt.Sprintf("r%d", i), "t")
		j.Priority = uint32(i) // serving order r0, r1, ...
		jobs = append(jobs, j)
	}
	if err := s.Put(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// Each call's Now half a millisecond past a millisecond, later call
	// by call: its TTRs begin at the next millisecond.
	type call struct {
		max  int
		now  time.Time
		want []string
	}
	calls := []call{{max: 1, want: []string{"r0"}}, {max: 3, want: []string{"r1", "r2", "r3"}}, {max: 1, want: []string{"r4"}},
		{max: 4, want: []string{"r5", "r6", "r7", "r8"}}, {max: 2, want: []string{"r9"}}, {max: 1}}
	for i := range calls {
		calls[i].now = hat(int64(1000 + 10*i)).Add(500 * time.Microsecond)
	}
	do := func(c rueidis.Completed) {
		t.Helper()
		if err := admin.Do(ctx, c).Error(); err != nil {
			t.Fatal(err)
		}
	}
	do(admin.B().ConfigResetstat().Build())
	do(admin.B().ClientPause().Timeout(10000).Write().Build())
	defer admin.Do(ctx, admin.B().ClientUnpause().Build())
	got := make([][]*delayq.Job, len(calls))
	errs := make([]error, len(calls))
	var wg sync.WaitGroup
	start := func(i int) {
		wg.Go(func() {
			got[i], errs[i] = s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: calls[i].max, Now: calls[i].now, By: fmt.Sprintf("w%d", i)})
		})
	}
	line := s.reserveLine()
	start(0)
	waitFor(t, 10*time.Second, "the first reserve in flight", func() bool { return line.Writing() == 1 })
	for i := 1; i < len(calls); i++ {
		start(i)
		waitFor(t, 10*time.Second, "the reserves to queue", func() bool { return line.Waiting() == i })
	}
	do(admin.B().ClientUnpause().Build())
	wg.Wait()
	for i, c := range calls {
		if errs[i] != nil {
			t.Fatalf("reserve %d = %v", i, errs[i])
		}
		var ids []string
		for _, j := range got[i] {
			ids = append(ids, j.ID)
			acted := delayq.TruncMilli(c.now)
			if !j.Deadline.Equal(store.BeginTTR(acted, c.now).Add(j.TTR)) || j.Attempts != 1 || len(j.History) != 1 ||
				!j.History[0].Reserved.Equal(acted) || j.History[0].By != fmt.Sprintf("w%d", i) {
				t.Errorf("reserve %d: %s deadline %v, attempts %d, history %+v; want deadline %v, reserved at %v by w%d",
					i, j.ID, j.Deadline, j.Attempts, j.History, store.BeginTTR(acted, c.now).Add(j.TTR), acted, i)
			}
		}
		if strings.Join(ids, ",") != strings.Join(c.want, ",") {
			t.Errorf("reserve %d (max %d) = %v, want %v", i, c.max, ids, c.want)
		}
	}
	stats := ok(admin.Do(ctx, admin.B().Info().Section("commandstats").Build()).ToString())(t)
	// The first reserve alone removes its job from the ready and age
	// indexes (two ZREMs), the group all of its jobs likewise.
	if zrem := cmdCalls(stats, "zrem"); zrem != 4 {
		t.Errorf("ZREM calls = %d, want 4: two for the first reserve alone, two for the group of %d", zrem, len(calls)-1)
	}
	// Each of the two adds its jobs to the reserved index and marks the
	// bucket once; on a Cluster the group's deadlines are later than the
	// first reserve's, which the bucket entry holds already, so the group
	// sends no mark (clusterMarkLua).
	if zadd, want := cmdCalls(stats, "zadd"), map[bool]int{true: 4, false: 3}[s.oneNode]; zadd != want {
		t.Errorf("ZADD calls = %d, want %d: two for the first reserve alone, %d for the group of %d", zadd, want, want-2, len(calls)-1)
	}
	if pub := cmdCalls(stats, "publish") + cmdCalls(stats, "spublish"); pub != 0 {
		t.Errorf("PUBLISH and SPUBLISH calls = %d, want 0: no other instance listens", pub)
	}
	st := ok(s.TopicStats(ctx, "t"))(t)
	if st.Ready != 0 || st.Reserved != n {
		t.Errorf("topic stats = %+v, want %d reserved, none ready", st, n)
	}
}

// TestReserveDeadlineEventsOnlyWhenEarlier: a reserve tells the other
// instances' timers of its new deadline only when that lowered the
// topic's timer bucket entry (a later one is no news: the bucket's timer
// steps at the entry anyway), and the entry then holds it. On one node
// the script does both; on a Cluster they follow it. Each kind of Redis
// is the test's own, so its PUBLISH and SPUBLISH counts are the two
// instances' alone.
func TestReserveDeadlineEventsOnlyWhenEarlier(t *testing.T) {
	eachPrivateRedis(t, testReserveDeadlineEventsOnlyWhenEarlier)
}

func testReserveDeadlineEventsOnlyWhenEarlier(t *testing.T, addrs []string) {
	stores := group(t, addrs, 2, Options{Volatile: true})
	a, b := stores[0], stores[1]
	ctx := t.Context()
	events := listening(t, a, b)
	now := delayq.TruncMilli(time.Now())
	// Served in this order, each with its own TTR: the second's deadline
	// is later than the first's, the third's earlier.
	ttrs := []time.Duration{2 * time.Hour, 3 * time.Hour, 30 * time.Minute}
	jobs := ttrJobs("r", "de", now, ttrs)
	if err := a.Put(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	published := func() int { return commandCalls(t, a, "publish") + commandCalls(t, a, "spublish") }
	for i, j := range jobs {
		before := published()
		got := ok(a.Reserve(ctx, store.ReserveParams{Topics: []string{"de"}, Max: 1, Now: now, By: "w"}))(t)
		if len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("reserve %d = %v, want %s", i, got, j.ID)
		}
		want := 1
		if i == 1 {
			want = 0
		}
		if n := published() - before; n != want {
			t.Errorf("reserve %d (deadline in %v) published %d times, want %d", i, ttrs[i], n, want)
		}
	}
	// B hears both deadlines that lowered the entry (an event due within
	// the minute is a timer's "step now" after a lease change).
	heard := map[int64]bool{} // unix ms
	timeout := time.After(5 * time.Second)
	for !heard[now.Add(2*time.Hour).UnixMilli()] || !heard[now.Add(30*time.Minute).UnixMilli()] {
		select {
		case ev := <-events:
			if !ev.Due.Before(now.Add(time.Minute)) {
				heard[ev.Due.UnixMilli()] = true
			}
		case <-timeout:
			t.Fatalf("B heard deadlines %v, want %v and %v", heard, now.Add(2*time.Hour), now.Add(30*time.Minute))
		}
	}
	score := ok(a.c.Do(ctx, a.c.B().Zscore().Key(a.k.bucketDue(bucketOf("de", a.opt.Buckets))).Member("de").Build()).AsFloat64())(t)
	if e := time.UnixMilli(int64(score)); !e.Equal(now.Add(30 * time.Minute)) {
		t.Errorf("the topic's bucket entry = %v, want the earliest deadline %v", e, now.Add(30*time.Minute))
	}
}

// TestDeleteGroupOfEveryState: one group of deletes of jobs in every
// state, as an operator's deletes may meet: a ready, a delayed and a
// buried job deleted (retained as deleted, deleted and failed, and out
// of their live indexes), a reserved job deleted without its reservation
// (refused alone), the same job then finished with it, and a forced
// delete of another reserved job. On one node and on a Cluster.
func TestDeleteGroupOfEveryState(t *testing.T) {
	eachRedis(t, testDeleteGroupOfEveryState)
}

func testDeleteGroupOfEveryState(t *testing.T, addrs []string) {
	s := openStore(t, addrs, Options{Retention: store.Retention{For: time.Hour}})
	defer s.Close()
	ctx := t.Context()
	ready, delayed, buried, held, forced := hjob("ready", "t"), hjob("delayed", "t"), hjob("buried", "t"), hjob("held", "t"), hjob("forced", "t")
	delayed.State, delayed.Due = delayq.StateDelayed, hat(time.Hour.Milliseconds())
	ready.Priority, held.Priority, forced.Priority, buried.Priority = 10, 0, 1, 2 // the last three reserved first
	if err := s.Put(ctx, []*delayq.Job{ready, delayed, buried, held, forced}); err != nil {
		t.Fatal(err)
	}
	got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 3, Now: hat(1), By: "w"}))(t)
	if len(got) != 3 || got[0].ID != "held" || got[1].ID != "forced" || got[2].ID != "buried" {
		t.Fatalf("Reserve = %v, want held, forced, buried", got)
	}
	ok(s.Bury(ctx, store.BuryParams{Ref: delayq.Ref{ID: "buried", Reservation: got[2].Reservation}, Now: hat(2)}))(t)
	type del struct {
		p    store.DeleteParams
		want error
	}
	dels := []del{
		{p: store.DeleteParams{Ref: delayq.Ref{ID: "ready"}, Force: true}},
		{p: store.DeleteParams{Ref: delayq.Ref{ID: "delayed"}, Force: true}},
		{p: store.DeleteParams{Ref: delayq.Ref{ID: "buried"}, Force: true}},
		{p: store.DeleteParams{Ref: delayq.Ref{ID: "held"}}, want: delayq.ErrNotReserved},
		{p: store.DeleteParams{Ref: delayq.Ref{ID: "held", Reservation: got[0].Reservation}}},
		{p: store.DeleteParams{Ref: delayq.Ref{ID: "forced"}, Force: true}},
	}
	var calls []*finishCall
	for i, d := range dels {
		tg := ok(s.resolve(ctx, d.p.Ref))(t)
		calls = append(calls, &finishCall{t: tg, res: d.p.Ref.Reservation, force: d.p.Force,
			now: msString(hat(int64(10 + i))), ref: d.p.Ref})
	}
	s.writeFinishes(ctx, calls)
	for i, c := range calls {
		if (dels[i].want == nil && c.err != nil) || (dels[i].want != nil && !errors.Is(c.err, dels[i].want)) {
			t.Errorf("delete %d (%v) = %v, want %v", i, dels[i].p.Ref, c.err, dels[i].want)
		}
	}
	want := map[string]delayq.State{"ready": delayq.StateDeleted, "delayed": delayq.StateDeleted, "buried": delayq.StateFailed,
		"held": delayq.StateFinished, "forced": delayq.StateDeleted}
	for id, st := range want {
		if g, err := s.Get(ctx, delayq.Ref{ID: id}); err != nil || g.State != st {
			t.Errorf("Get(%s) = %+v, %v; want %s", id, g, err, st)
		}
	}
	if st := ok(s.TopicStats(ctx, "t"))(t); st.Total() != 0 {
		t.Errorf("topic stats after the group = %+v, want no live job", st)
	}
	for _, st := range []delayq.State{delayq.StateDeleted, delayq.StateFailed, delayq.StateFinished} {
		var ids []string
		for _, j := range ok(s.List(ctx, store.ListParams{Topic: "t", State: st}))(t).Jobs {
			ids = append(ids, j.ID)
		}
		var wantIDs []string
		for _, id := range []string{"ready", "delayed", "buried", "held", "forced"} { // in the order they ended
			if want[id] == st {
				wantIDs = append(wantIDs, id)
			}
		}
		if strings.Join(ids, ",") != strings.Join(wantIDs, ",") {
			t.Errorf("List(%s) = %v, want %v", st, ids, wantIDs)
		}
	}
}

// TestGroupsWaitForReplicas: with WaitReplicas, a group's scripts are
// followed by WAIT on their connection, and each call of the group is
// answered with its outcome: on a Redis without replicas, the calls
// written get the ReplicationError (their writes stand), a finish
// refused gets its own refusal. On one node and on a Cluster (a WAIT per
// topic there, on that topic's master).
func TestGroupsWaitForReplicas(t *testing.T) {
	eachRedis(t, testGroupsWaitForReplicas)
}

func testGroupsWaitForReplicas(t *testing.T, addrs []string) {
	s := openStore(t, addrs, Options{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond,
		Retention: store.Retention{For: time.Hour}})
	defer s.Close()
	ctx := t.Context()
	var repl *delayq.ReplicationError
	// Two topics: on a Cluster two slots, each topic's script with a
	// WAIT of its own.
	for _, j := range []*delayq.Job{hjob("a", "t"), hjob("b", "t"), hjob("c", "t"), hjob("d", "u")} {
		if err := s.Put(ctx, []*delayq.Job{j}); !errors.As(err, &repl) {
			t.Fatalf("Put(%s) = %v, want a ReplicationError", j.ID, err)
		}
	}
	now := time.Now()
	rcalls := []*reserveCall{{topic: "t", now: msString(now), begin: ceilMSString(now), max: 2, by: "w"},
		{topic: "u", now: msString(now), begin: ceilMSString(now), max: 1, by: "w"},
		{topic: "t", now: msString(now), begin: ceilMSString(now), max: 1, by: "w"}}
	s.writeReserves(ctx, rcalls)
	for i, c := range rcalls {
		if !errors.As(c.err, &repl) || len(c.jobs) != 0 {
			t.Errorf("grouped reserve %d = %d jobs, %v; want none and a ReplicationError", i, len(c.jobs), c.err)
		}
	}
	st := ok(s.TopicStats(ctx, "t"))(t)
	if st.Reserved != 3 {
		t.Fatalf("topic stats = %+v, want the three jobs reserved (the writes stand)", st)
	}
	var calls []*finishCall
	if st := ok(s.TopicStats(ctx, "u"))(t); st.Reserved != 1 {
		t.Fatalf("topic stats of u = %+v, want its job reserved", st)
	}
	for _, id := range []string{"a", "d", "c"} {
		g := ok(s.Get(ctx, delayq.Ref{ID: id}))(t)
		res := g.Reservation
		if id == "c" {
			res += "0"
		}
		ref := delayq.Ref{ID: id, Reservation: res}
		calls = append(calls, &finishCall{t: ok(s.resolve(ctx, ref))(t), res: res, now: msString(time.Now()), ref: ref})
	}
	s.writeFinishes(ctx, calls)
	for i, c := range calls {
		if i < 2 && !errors.As(c.err, &repl) {
			t.Errorf("grouped finish %d = %v, want a ReplicationError", i, c.err)
		}
		if i == 2 && !errors.Is(c.err, delayq.ErrNotReserved) {
			t.Errorf("grouped finish with a stale reservation = %v, want ErrNotReserved", c.err)
		}
	}
	for _, id := range []string{"a", "d"} {
		if g := ok(s.Get(ctx, delayq.Ref{ID: id}))(t); g.State != delayq.StateFinished {
			t.Errorf("Get(%s) = %+v, want finished (the write stands)", id, g)
		}
	}
}

// ttrJobs are ready jobs of topic, due and created at now, one per TTR
// of ttrs, ids prefix0, prefix1, ..., served in that order (priority i).
func ttrJobs(prefix, topic string, now time.Time, ttrs []time.Duration) []*delayq.Job {
	jobs := make([]*delayq.Job, len(ttrs))
	for i, ttr := range ttrs {
		j := hjob(fmt.Sprintf("%s%d", prefix, i), topic)
		j.Priority, j.TTR, j.Due, j.Created = uint32(i), ttr, now, now
		jobs[i] = j
	}
	return jobs
}
