package redisstore

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestClusterReserveMarksOnlyAnEarlierDeadline: on a Cluster a reserve
// whose new deadline is not earlier than the time its topic's
// P:{t}:marked shows the bucket entry at or below sends no mark to the
// bucket (one ZADD, of its reserved index, where it sent two), and one
// with an earlier deadline marks and the entry holds it. A topic without
// the key (a store an earlier build wrote, or the key expired) marks as
// before. Counted in INFO commandstats of a Cluster of the test's own,
// which nothing else writes to (leases renewed once an hour).
func TestClusterReserveMarksOnlyAnEarlierDeadline(t *testing.T) {
	s := openStore(t, privateCluster(t), Options{Volatile: true, LeaseTTL: time.Hour})
	defer s.Close()
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	// Served in this order: a deadline in 1 h, one later, one earlier,
	// and after the key is gone one later again.
	ttrs := []time.Duration{time.Hour, 2 * time.Hour, 30 * time.Minute, 3 * time.Hour}
	jobs := ttrJobs("m", "mk", now, ttrs)
	if err := s.Put(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	entry := func() time.Time {
		t.Helper()
		score := ok(s.c.Do(ctx, s.c.B().Zscore().Key(s.k.bucketDue(bucketOf("mk", s.opt.Buckets))).Member("mk").Build()).AsFloat64())(t)
		return time.UnixMilli(int64(score))
	}
	for i, j := range jobs {
		if i == 3 {
			// What a store written by an earlier build holds: no key.
			if err := s.c.Do(ctx, s.c.B().Del().Key(s.k.marked("mk")).Build()).Error(); err != nil {
				t.Fatal(err)
			}
		}
		before := commandCalls(t, s, "zadd")
		got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"mk"}, Max: 1, Now: now, By: "w"}))(t)
		if len(got) != 1 || got[0].ID != j.ID {
			t.Fatalf("reserve %d = %v, want %s", i, got, j.ID)
		}
		want, why := 2, "its reserved index and the bucket's mark"
		if i == 1 {
			want, why = 1, "its reserved index only: the entry is at the earlier deadline already"
		}
		if n := commandCalls(t, s, "zadd") - before; n != want {
			t.Errorf("reserve %d (deadline in %v): %d ZADDs, want %d (%s)", i, ttrs[i], n, want, why)
		}
		wantEntry := now.Add(time.Hour)
		if i >= 2 {
			wantEntry = now.Add(30 * time.Minute)
		}
		if e := entry(); !e.Equal(wantEntry) {
			t.Errorf("after reserve %d the topic's bucket entry = %v, want the earliest deadline %v", i, e, wantEntry)
		}
	}
}

// TestClusterTTRAfterATickRaisedTheEntry: the bucket's timer raises a
// topic's entry past the deadline an earlier reserve left there (that
// job was deleted; what is left is due in an hour), and then another
// instance reserves a job whose deadline is later than the old one and
// earlier than the raised entry. That reserve must mark the bucket:
// the holder's next step is at its deadline, and its TTR runs out there.
// Had the tick left P:{t}:marked at the old deadline, the reserve would
// skip its mark and the job would stay reserved until the sweep, 30 s
// on (the holder's next step went to another topic's earlier entry).
// Times are the tick's and the reserves' Now, so nothing waits on a
// clock; the steps take well under markedFor, the most a stale key lives.
func TestClusterTTRAfterATickRaisedTheEntry(t *testing.T) {
	stores := group(t, redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER"), 2, Options{})
	const topic = "ttr-raised"
	b := bucketOf(topic, stores[0].opt.Buckets)
	// Once the buckets are split no lease changes hands, so no sweep (a
	// taker's) lowers the entry behind the test's back.
	waitFor(t, 10*time.Second, "the buckets split", func() bool {
		return partition(stores, stores[0].opt.Buckets) && len(stores[0].Buckets()) > 0 && len(stores[1].Buckets()) > 0
	})
	var holder *Store
	for _, s := range stores {
		if slices.Contains(s.leases.held(), b) {
			holder = s
		}
	}
	first, other := stores[0], stores[1] // the two reserving instances
	ctx := t.Context()
	now := delayq.TruncMilli(time.Now())
	j0, j1, later := hjob("t0", topic), hjob("t1", topic), hjob("t2", topic)
	j0.Priority, j0.TTR, j0.Due, j0.Created = 0, time.Minute, now, now
	j1.Priority, j1.TTR, j1.Due, j1.Created = 1, time.Minute, now, now
	later.State, later.Due, later.Created = delayq.StateDelayed, now.Add(time.Hour), now
	if err := first.Put(ctx, []*delayq.Job{j0, j1, later}); err != nil {
		t.Fatal(err)
	}
	// Another topic of the holder's, due in half an hour: the holder's
	// next step repairs the earliest entry of its buckets only (tick.go:
	// next), which is then this one's, not a late entry behind it.
	side := ""
	for i := 0; side == ""; i++ {
		if n := fmt.Sprintf("side-%d", i); slices.Contains(holder.Buckets(), bucketOf(n, holder.opt.Buckets)) && bucketOf(n, holder.opt.Buckets) != b {
			side = n
		}
	}
	sj := hjob("s0", side)
	sj.State, sj.Due, sj.Created = delayq.StateDelayed, now.Add(30*time.Minute), now
	if err := first.Put(ctx, []*delayq.Job{sj}); err != nil {
		t.Fatal(err)
	}
	// j0 reserved and deleted: its deadline (now+1m) stays the entry.
	got := ok(first.Reserve(ctx, store.ReserveParams{Topics: []string{topic}, Max: 1, Now: now, By: "a"}))(t)
	if len(got) != 1 || got[0].ID != "t0" {
		t.Fatalf("first reserve = %v, want t0", got)
	}
	if _, err := first.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: got[0].Seq, Reservation: got[0].Reservation}, Now: now}); err != nil {
		t.Fatal(err)
	}
	// The holder's tick passes that entry: nothing moves, and the entry
	// goes up to the delayed job's due.
	at := now.Add(2 * time.Minute)
	res := ok(holder.Tick(ctx, store.TickParams{Now: at}))(t)
	if len(res.Ready) != 0 {
		t.Fatalf("tick at %v moved %v, want nothing", at, res.Ready)
	}
	score := ok(holder.c.Do(ctx, holder.c.B().Zscore().Key(holder.k.bucketDue(b)).Member(topic).Build()).AsFloat64())(t)
	if e := time.UnixMilli(int64(score)); !e.Equal(now.Add(time.Hour)) {
		t.Fatalf("after the tick the topic's bucket entry = %v, want the delayed job's due %v", e, now.Add(time.Hour))
	}
	// The other instance reserves j1 then: deadline at+1m, between the
	// old entry and the raised one.
	got = ok(other.Reserve(ctx, store.ReserveParams{Topics: []string{topic}, Max: 1, Now: at, By: "b"}))(t)
	if len(got) != 1 || got[0].ID != "t1" {
		t.Fatalf("second reserve = %v, want t1", got)
	}
	deadline := got[0].Deadline
	score = ok(holder.c.Do(ctx, holder.c.B().Zscore().Key(holder.k.bucketDue(b)).Member(topic).Build()).AsFloat64())(t)
	if e := time.UnixMilli(int64(score)); !e.Equal(deadline) {
		t.Errorf("after the second reserve the topic's bucket entry = %v, want its deadline %v", e, deadline)
	}
	res = ok(holder.Tick(ctx, store.TickParams{Now: at.Add(time.Millisecond)}))(t)
	if !res.Next.Equal(deadline) {
		t.Errorf("the holder's next step after the reserve = %v, want t1's deadline %v", res.Next, deadline)
	}
	res = ok(holder.Tick(ctx, store.TickParams{Now: deadline}))(t)
	if res.Ready[topic] != 1 {
		t.Fatalf("tick at t1's deadline %v made %v ready, want t1 back (TTR ran out)", deadline, res.Ready)
	}
	back := ok(other.Get(ctx, delayq.Ref{Seq: got[0].Seq}))(t)
	if back.State != delayq.StateReady {
		t.Errorf("t1 after its TTR = %s, want ready", back.State)
	}
}
