package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestOneNodeTickIsOneScript checks that a Tick on one Redis server is one
// round trip: one script that moves the due work of every due topic of the
// instance's buckets, sets their bucket entries exactly, repairs an early
// entry and answers the next due time, with no other command or script.
func TestOneNodeTickIsOneScript(t *testing.T) {
	_, port := startRedis(t, 0)
	// A long lease: no lease round runs a script while the test counts.
	s := openStore(t, []string{fmt.Sprintf("127.0.0.1:%d", port)}, Options{Volatile: true, LeaseTTL: time.Minute})
	defer s.Close()
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	later := now.Add(time.Hour)
	var jobs []*delayq.Job
	for i, topic := range []string{"a", "b", "c", "a"} {
		jobs = append(jobs, &delayq.Job{ID: "due" + strconv.Itoa(i), Topic: topic, TTR: time.Minute,
			State: delayq.StateDelayed, Due: now.Add(-time.Duration(i+1) * time.Millisecond), Created: now})
	}
	jobs = append(jobs, &delayq.Job{ID: "later", Topic: "d", TTR: time.Minute, State: delayq.StateDelayed, Due: later, Created: now})
	for _, j := range jobs {
		if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	// An early entry: topic e is marked due in a minute but holds nothing.
	early := s.k.bucketDue(bucketOf("e", s.opt.Buckets))
	if err := s.c.Do(ctx, s.c.B().Zadd().Key(early).ScoreMember().ScoreMember(float64(now.Add(time.Minute).UnixMilli()), "e").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	// A Tick before the due times loads the script (EVALSHA, NOSCRIPT, EVAL).
	if _, err := s.Tick(ctx, store.TickParams{Now: now.Add(-time.Hour), Max: 100}); err != nil {
		t.Fatal(err)
	}
	if err := s.c.Do(ctx, s.c.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	res, err := s.Tick(ctx, store.TickParams{Now: now, Max: 100})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ready["a"] != 2 || res.Ready["b"] != 1 || res.Ready["c"] != 1 || len(res.Ready) != 3 {
		t.Errorf("Tick made ready %v, want a:2 b:1 c:1", res.Ready)
	}
	if len(res.Lateness) != 4 {
		t.Errorf("Tick reported %d latenesses, want 4", len(res.Lateness))
	}
	if !res.Next.Equal(later) {
		t.Errorf("Tick Next = %v, want %v (the early entry of e repaired, d's due)", res.Next, later)
	}
	if n := commandCalls(t, s, "evalsha"); n != 1 {
		t.Errorf("Tick ran %d EVALSHA, want 1", n)
	}
	for _, cmd := range []string{"evalsha_ro", "eval", "publish"} {
		if n := commandCalls(t, s, cmd); n != 0 {
			t.Errorf("Tick ran %d %s, want none (one script; nobody else listens)", n, strings.ToUpper(cmd))
		}
	}
	for topic, want := range map[string]string{"a": "", "b": "", "c": "", "e": "", "d": strconv.FormatInt(later.UnixMilli(), 10)} {
		got, err := s.c.Do(ctx, s.c.B().Zscore().Key(s.k.bucketDue(bucketOf(topic, s.opt.Buckets))).Member(topic).Build()).ToString()
		if rueidis.IsRedisNil(err) {
			got, err = "", nil
		}
		if err != nil || got != want {
			t.Errorf("bucket entry of %s = %q, %v; want %q", topic, got, err, want)
		}
	}
	// The next Tick at the same instant finds nothing more to do.
	res, err = s.Tick(ctx, store.TickParams{Now: now, Max: 100})
	if err != nil || len(res.Ready) != 0 || !res.Next.Equal(later) {
		t.Errorf("second Tick = %+v, %v; want nothing ready and Next %v", res, err, later)
	}
}

// TestOneNodeTickCutsAcrossTopics checks that a Tick with a max below the
// due work moves the earliest jobs across all topics, and that the next
// Tick finds the rest.
func TestOneNodeTickCutsAcrossTopics(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{})
	defer s.Close()
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	// x due at -6, -4, -2 ms; y at -5, -3, -1 ms.
	for i := range 6 {
		topic := []string{"x", "y"}[i%2]
		j := &delayq.Job{ID: "c" + strconv.Itoa(i), Topic: topic, TTR: time.Minute,
			State: delayq.StateDelayed, Due: now.Add(time.Duration(i-6) * time.Millisecond), Created: now}
		if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	res, err := s.Tick(ctx, store.TickParams{Now: now, Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ready["x"] != 2 || res.Ready["y"] != 1 {
		t.Errorf("Tick(max 3) made ready %v, want x:2 y:1 (the three earliest)", res.Ready)
	}
	if !res.Next.Equal(now) {
		t.Errorf("Tick(max 3) Next = %v, want now %v (more is due)", res.Next, now)
	}
	res, err = s.Tick(ctx, store.TickParams{Now: now, Max: 3})
	if err != nil {
		t.Fatal(err)
	}
	if res.Ready["x"] != 1 || res.Ready["y"] != 2 || !res.Next.IsZero() {
		t.Errorf("second Tick = %v, Next %v; want x:1 y:2 and nothing pending", res.Ready, res.Next)
	}
}

// TestOneNodeTickWakesOtherInstances checks that the one-script Tick
// publishes the ready counts to another instance waiting on the topic.
func TestOneNodeTickWakesOtherInstances(t *testing.T) {
	// One bucket: the first instance holds it, the second none.
	stores := group(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), 2, Options{Buckets: 1})
	a, b := stores[0], stores[1]
	ctx := t.Context()
	events := listening(t, a, b)
	waitFor(t, 5*time.Second, "A holding the bucket", func() bool { return len(a.Buckets()) == 1 })
	if err := b.MarkWaiting(ctx, []string{"tw"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	now := delayq.TruncMilli(time.Now())
	j := &delayq.Job{ID: "w", Topic: "tw", TTR: time.Minute, State: delayq.StateDelayed, Due: now.Add(-time.Millisecond), Created: now}
	if err := a.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	res, err := a.Tick(ctx, store.TickParams{Now: now, Max: 10})
	if err != nil || res.Ready["tw"] != 1 {
		t.Fatalf("Tick = %+v, %v; want tw:1", res, err)
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.Topic == "tw" && ev.Count == 1 {
				return
			}
		case <-timeout:
			t.Fatal("the other instance never heard the tick's ready job")
		}
	}
}

// clusterCalls is how many times every master of the Cluster has run
// command (INFO commandstats), summed.
func clusterCalls(t *testing.T, s *Store, command string) int {
	t.Helper()
	n := 0
	for _, c := range s.c.Nodes() {
		info := ok(c.Do(t.Context(), c.B().Info().Section("commandstats").Build()).ToString())(t)
		for _, line := range strings.Split(info, "\n") {
			if rest, found := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+command+":calls="); found {
				v, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				n += v
			}
		}
	}
	return n
}

// TestClusterWakeUpsAreSharded checks that on a Cluster the wake-ups go
// over sharded pub/sub (SPUBLISH, kept on one shard) and still reach the
// other instance, and that the sharded channels' tags hash as Redis does,
// one into each range of the slots.
func TestClusterWakeUpsAreSharded(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")
	stores := group(t, addrs, 2, Options{})
	a, b := stores[0], stores[1]
	ctx := t.Context()
	if !a.sharded {
		t.Skip("the test Cluster runs a Redis older than 7.0: no sharded pub/sub")
	}
	for i, ch := range a.channels {
		slot := ok(a.c.Do(ctx, a.c.B().ClusterKeyslot().Key(ch).Build()).AsInt64())(t)
		if int(slot) != keySlot(shardTag(i)) || int(slot)*shardChannels/clusterSlots != i {
			t.Errorf("channel %d %q: Redis puts it in slot %d, keySlot says %d; want it in range %d", i, ch, slot, keySlot(shardTag(i)), i)
		}
	}
	events, err := b.Notify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "B listening on every channel", b.Listening)
	topics := []string{"s1", "s2", "s3", "s4", "s5"}
	if err := b.MarkWaiting(ctx, topics, time.Minute); err != nil {
		t.Fatal(err)
	}
	published, spublished := clusterCalls(t, a, "publish"), clusterCalls(t, a, "spublish")
	now := delayq.TruncMilli(time.Now())
	for i, topic := range topics {
		j := &delayq.Job{ID: "sh" + strconv.Itoa(i), Topic: topic, TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
		if err := a.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	heard := map[string]bool{}
	timeout := time.After(5 * time.Second)
	for len(heard) < len(topics) {
		select {
		case ev := <-events:
			if ev.Count == 1 && strings.HasPrefix(ev.Topic, "s") {
				heard[ev.Topic] = true
			}
		case <-timeout:
			t.Fatalf("B heard puts of %v on A, want all of %v", heard, topics)
		}
	}
	// Other tests' stores may publish meanwhile, but none of this
	// package's stores PUBLISHes on a Cluster of Redis 7.
	if n := clusterCalls(t, a, "publish") - published; n != 0 {
		t.Errorf("PUBLISH ran %d times on the Cluster, want 0 (sharded pub/sub)", n)
	}
	if n := clusterCalls(t, a, "spublish") - spublished; n < len(topics) {
		t.Errorf("SPUBLISH ran %d times for %d puts, want at least one each", n, len(topics))
	}
}

// TestClusterFreshPutNeedsNoIdIndex checks PutFresh on a Cluster: the
// ids carry the seqs, so neither an id claim nor the topic's id index is
// written, and the job is found, reserved and deleted by id and by seq
// as any other.
func TestClusterFreshPutNeedsNoIdIndex(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER"), Options{})
	defer s.Close()
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	jobs := []*delayq.Job{
		{ID: "f1", Topic: "fresh", Body: []byte("one"), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now},
		{ID: "f2", Topic: "fresh", Body: []byte("two"), TTR: time.Minute, State: delayq.StateDelayed, Due: now.Add(time.Hour), Created: now},
	}
	if err := s.PutFresh(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if jobs[0].Seq == 0 || jobs[1].Seq != jobs[0].Seq+1 {
		t.Fatalf("seqs %d, %d; want consecutive seqs written back", jobs[0].Seq, jobs[1].Seq)
	}
	if n := ok(s.c.Do(ctx, s.c.B().Exists().Key(s.k.topic("fresh").idsKey()).Build()).AsInt64())(t); n != 0 {
		t.Errorf("the topic's id index exists after a fresh put on a Cluster, want none (the claim names the seq)")
	}
	f1, f2 := jobs[0].ID, jobs[1].ID
	for i, j := range jobs {
		if seq, ok := freshSeq(j.ID); !ok || seq != j.Seq {
			t.Errorf("job %d's id %s carries seq %d (%v), want %d", i, j.ID, seq, ok, j.Seq)
		}
		if n := ok(s.c.Do(ctx, s.c.B().Exists().Key(s.k.claim(j.ID)).Build()).AsInt64())(t); n != 0 {
			t.Errorf("the id %s has a claim, want none (the id carries its seq)", j.ID)
		}
	}
	due := ok(s.c.Do(ctx, s.c.B().Zscore().Key(s.k.bucketDue(bucketOf("fresh", s.opt.Buckets))).Member("fresh").Build()).AsFloat64())(t)
	if int64(due) != now.Add(time.Hour).UnixMilli() {
		t.Errorf("bucket entry of the topic = %v, want the delayed job's due %d", int64(due), now.Add(time.Hour).UnixMilli())
	}
	for _, ref := range []delayq.Ref{{ID: f2}, {Seq: jobs[1].Seq}} {
		if j, err := s.Get(ctx, ref); err != nil || j.ID != f2 || string(j.Body) != "two" || j.State != delayq.StateDelayed {
			t.Errorf("Get(%v) = %+v, %v; want f2, delayed", ref, j, err)
		}
	}
	got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"fresh"}, Max: 2, Now: time.Now(), By: "w"}))(t)
	if len(got) != 1 || got[0].ID != f1 {
		t.Fatalf("Reserve = %v, want f1", got)
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: f1, Reservation: got[0].Reservation}, Now: time.Now()}); err != nil {
		t.Fatalf("Delete(f1) = %v", err)
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: f2}, Force: true, Now: time.Now()}); err != nil {
		t.Fatalf("Delete(f2) = %v", err)
	}
	// A put of the same id may come again once the job is gone.
	again := &delayq.Job{ID: f1, Topic: "fresh", TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
	if err := s.Put(context.WithoutCancel(ctx), []*delayq.Job{again}); err != nil {
		t.Errorf("Put of f1 after its delete = %v", err)
	}
}

// TestOneNodeDueEventsOnlyWhenEarlier checks that on one node a put or a
// reserve tells the other instances' timers of its due time or deadline
// only when that lowered the topic's bucket entry: a later one is no
// news, since the bucket's timer steps at the entry anyway. Pub/sub keeps
// the order in which Redis ran the scripts, so every event of an earlier
// script arrives before that of the last one.
func TestOneNodeDueEventsOnlyWhenEarlier(t *testing.T) {
	stores := group(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), 2, Options{})
	a, b := stores[0], stores[1]
	ctx := t.Context()
	events := listening(t, a, b)
	now := delayq.TruncMilli(time.Now())
	put := func(id string, state delayq.State, due time.Time) {
		t.Helper()
		j := &delayq.Job{ID: id, Topic: "de", TTR: 2 * time.Hour, State: state, Due: due, Created: now}
		if err := a.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	// until collects B's due events up to and including want.
	until := func(want time.Time) []time.Time {
		t.Helper()
		var got []time.Time
		timeout := time.After(5 * time.Second)
		for {
			select {
			case ev := <-events:
				if ev.Due.IsZero() {
					continue
				}
				got = append(got, ev.Due)
				if ev.Due.Equal(want) {
					return got
				}
			case <-timeout:
				t.Fatalf("B heard due times %v, never %v", got, want)
			}
		}
	}
	put("d1", delayq.StateDelayed, now.Add(time.Hour))
	until(now.Add(time.Hour))
	put("d2", delayq.StateDelayed, now.Add(3*time.Hour)) // later than the entry: no event
	put("r1", delayq.StateReady, now)
	if got := ok(a.Reserve(ctx, store.ReserveParams{Topics: []string{"de"}, Max: 1, Now: now, By: "w"}))(t); len(got) != 1 {
		t.Fatalf("Reserve = %v, want r1", got)
	} // its deadline, now + 2h, is later than the entry too
	put("d3", delayq.StateDelayed, now.Add(30*time.Minute)) // earlier: an event
	if got := until(now.Add(30 * time.Minute)); len(got) != 1 {
		t.Errorf("B heard due times %v, want only %v (the later due and deadline lowered nothing)", got, now.Add(30*time.Minute))
	}
}

// listening returns b's Notify events once b listens and Redis has
// confirmed a's subscription (a's scripts publish only then).
func listening(t *testing.T, a, b *Store) <-chan store.Event {
	t.Helper()
	events, err := b.Notify(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "B listening", b.Listening)
	waitFor(t, 5*time.Second, "A subscribed", func() bool { return a.fan.own() == "1" })
	return events
}
