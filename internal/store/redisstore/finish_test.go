package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestOneNodeFinishesShareOneScript: finishes that arrive while one is in
// flight are written together, one script for the group (one ZREM of the
// reserved index for all of them, read in INFO commandstats), and each is
// answered on its own: a finish with a reservation that no longer holds
// its job fails alone with ErrNotReserved, a second finish of a job the
// group ends fails alone with ErrNotFound, and every other job ends
// (retained with its history, or gone without retention).
func TestOneNodeFinishesShareOneScript(t *testing.T) {
	addrs := privateRedis(t)
	// Another connection pauses Redis's writes while the finishes queue
	// up, and reads the counters.
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, keep := range []time.Duration{time.Hour, 0} {
		t.Run("retain="+keep.String(), func(t *testing.T) {
			s := openStore(t, addrs, Options{Volatile: true, Retention: store.Retention{For: keep}})
			defer s.Close()
			ctx := t.Context()
			const n = 24
			var jobs []*delayq.Job
			for i := range n {
				jobs = append(jobs, hjob(fmt.Sprintf("f%d", i), "t"))
			}
			if err := s.Put(ctx, jobs); err != nil {
				t.Fatal(err)
			}
			got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: n, Now: time.Now(), By: "w"}))(t)
			if len(got) != n {
				t.Fatalf("Reserve = %d jobs, want %d", len(got), n)
			}
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
				if len(l.Jobs) != n {
					t.Errorf("List(finished) = %d jobs, want %d", len(l.Jobs), n)
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

// TestOneNodeFinishGroupWithAnUnreadableRecord: a group whose script
// fails on a record it cannot read wrote nothing (it reads every record
// before it writes), and is written again one call at a time, so only
// the call of that record fails.
func TestOneNodeFinishGroupWithAnUnreadableRecord(t *testing.T) {
	s := retaining(t, 1, store.Retention{For: time.Hour})[0]
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

// TestOneNodeReservesShareOneScript: single-topic reserves that arrive
// while one is in flight are written together, one script for the group
// (one ZREM of the ready index for all of them, read in INFO
// commandstats), and each is served as if alone, in order: up to its own
// Max of the best jobs the calls before it left, acted at its own Now,
// by its own name, and its jobs' TTRs begin at its own Now rounded up
// (store.BeginTTR), not at the Now of the call that led the group.
func TestOneNodeReservesShareOneScript(t *testing.T) {
	addrs := privateRedis(t)
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	s := openStore(t, addrs, Options{Volatile: true, Retention: store.Retention{For: time.Hour}})
	defer s.Close()
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
	st := ok(s.TopicStats(ctx, "t"))(t)
	if st.Ready != 0 || st.Reserved != n {
		t.Errorf("topic stats = %+v, want %d reserved, none ready", st, n)
	}
}

// TestOneNodeDeleteGroupOfEveryState: one group of deletes of jobs in
// every state, as an operator's deletes may meet: a ready, a delayed and
// a buried job deleted (retained as deleted, deleted and failed, and out
// of their live indexes), a reserved job deleted without its reservation
// (refused alone), the same job then finished with it, and a forced
// delete of another reserved job.
func TestOneNodeDeleteGroupOfEveryState(t *testing.T) {
	s := retaining(t, 1, store.Retention{For: time.Hour})[0]
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

// TestOneNodeGroupsWaitForReplicas: with WaitReplicas, a group's scripts
// are followed by one WAIT on their connection, and each call of the
// group is answered with its outcome: on a Redis without replicas, the
// calls written get the ReplicationError (their writes stand), a finish
// refused gets its own refusal.
func TestOneNodeGroupsWaitForReplicas(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{WaitReplicas: 1, WaitTimeout: 50 * time.Millisecond,
		Retention: store.Retention{For: time.Hour}})
	defer s.Close()
	ctx := t.Context()
	var repl *delayq.ReplicationError
	if err := s.Put(ctx, []*delayq.Job{hjob("a", "t"), hjob("b", "t"), hjob("c", "t")}); !errors.As(err, &repl) {
		t.Fatalf("Put = %v, want a ReplicationError", err)
	}
	now := time.Now()
	rcalls := []*reserveCall{{topic: "t", now: msString(now), begin: ceilMSString(now), max: 2, by: "w"},
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
	for _, id := range []string{"a", "b", "c"} {
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
	for _, id := range []string{"a", "b"} {
		if g := ok(s.Get(ctx, delayq.Ref{ID: id}))(t); g.State != delayq.StateFinished {
			t.Errorf("Get(%s) = %+v, want finished (the write stands)", id, g)
		}
	}
}
