package redisstore

import (
	"bufio"
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestOneNodeAndMultiStepShareTheLayout: on one Redis server, jobs put,
// reserved and ended through the multi-step path (the only one before
// issue 31, and still the Cluster's) are served through the one-script
// path and the other way round, and both leave the same global entries:
// a store written by an earlier release needs no migration.
func TestOneNodeAndMultiStepShareTheLayout(t *testing.T) {
	clk := &fakeClock{now: hbase}
	ss := retaining(t, 2, store.Retention{For: time.Hour, Now: clk.Now})
	old, cur := ss[0], ss[1]
	if !cur.oneNode {
		t.Fatal("a store on a standalone Redis does not take the one-node path")
	}
	old.oneNode = false
	ctx := t.Context()

	// Written the old way, served the new way.
	j1, j2 := hjob("a1", "t"), hjob("a2", "t")
	if err := old.Put(ctx, []*delayq.Job{j1, j2}); err != nil {
		t.Fatal(err)
	}
	got := ok(cur.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 2, Now: hat(1), By: "w"}))(t)
	if len(got) != 2 || got[0].ID != "a1" || got[1].ID != "a2" || got[0].Seq != j1.Seq {
		t.Fatalf("Reserve through the one-node path = %v, want a1 and a2", got)
	}
	cur.topicOf = seqTopics{} // find the topic through the seq index old wrote
	ok(cur.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: j1.Seq, Reservation: got[0].Reservation}, Now: hat(2)}))(t)
	ok(cur.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "a2", Reservation: got[1].Reservation}, Now: hat(2)}))(t)

	// Written the new way, served the old way.
	j3 := hjob("a3", "t")
	if err := cur.Put(ctx, []*delayq.Job{j3}); err != nil {
		t.Fatal(err)
	}
	got = ok(old.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 2, Now: hat(3), By: "w"}))(t)
	if len(got) != 1 || got[0].ID != "a3" || got[0].Seq != j3.Seq || string(got[0].Body) != "body of a3" {
		t.Fatalf("Reserve through the multi-step path = %v, want a3", got)
	}
	ok(old.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: j3.Seq, Reservation: got[0].Reservation}, Now: hat(4)}))(t)

	for _, j := range []*delayq.Job{j1, j2, j3} {
		for _, s := range ss {
			for _, ref := range []delayq.Ref{{ID: j.ID}, {Seq: j.Seq}} {
				g, err := s.Get(ctx, ref)
				if err != nil || g.State != delayq.StateFinished || g.Seq != j.Seq || len(g.History) != 1 {
					t.Fatalf("Get(%v) (one node: %v) = %+v, %v; want the finished job", ref, s.oneNode, g, err)
				}
			}
			err := s.Put(ctx, []*delayq.Job{hjob(j.ID, "other")})
			var ex *delayq.ExistsError
			if !errors.As(err, &ex) || ex.State != delayq.StateFinished {
				t.Fatalf("Put of finished %s (one node: %v) = %v, want ExistsError{finished}", j.ID, s.oneNode, err)
			}
		}
		// The same claim whichever path ended the job: retained with the
		// retention as TTL. The seq's entry: left in its shard by
		// either path (its ended index's trim drops it); an earlier
		// build's multi-step path moved it to a key of its own with the
		// TTL (layout2_test.go and clusterretain_test.go read that).
		c := cur.c
		claim, err := c.Do(ctx, c.B().Get().Key(cur.k.claim(j.ID)).Build()).ToString()
		ttl, _ := c.Do(ctx, c.B().Pttl().Key(cur.k.claim(j.ID)).Build()).AsInt64()
		if err != nil || !strings.HasPrefix(claim, "t|0|") || ttl <= 0 || ttl > time.Hour.Milliseconds() {
			t.Fatalf("claim of %s = %q (ttl %d ms), %v; want a retained claim with a TTL", j.ID, claim, ttl, err)
		}
		seq := strconv.FormatUint(j.Seq, 10)
		inShard, _ := c.Do(ctx, c.B().Hexists().Key(cur.k.seqShard(j.Seq)).Field(seq).Build()).AsInt64()
		key, kerr := c.Do(ctx, c.B().Get().Key(cur.k.retainedSeq(j.Seq)).Build()).ToString()
		if inShard != 1 || kerr == nil {
			t.Fatalf("seq %s of retained %s in its shard: %d, retained seq key %q, %v; want the shard only", seq, j.ID, inShard, key, kerr)
		}
	}
}

// TestOneNodeDeleteDropsGlobalEntries: without retention, a delete on one
// node drops the job's id claim and seq entry in its own script.
func TestOneNodeDeleteDropsGlobalEntries(t *testing.T) {
	s := retaining(t, 1, store.Retention{})[0]
	ctx := t.Context()
	j := hjob("d1", "t")
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	c := s.c
	seq := strconv.FormatUint(j.Seq, 10)
	if v, err := c.Do(ctx, c.B().Hget().Key(s.k.seqShard(j.Seq)).Field(seq).Build()).ToString(); err != nil || v != "t" {
		t.Fatalf("seq entry after a one-node put = %q, %v; want t", v, err)
	}
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: j.Seq}, Now: hat(1)}))(t)
	if n, _ := c.Do(ctx, c.B().Exists().Key(s.k.claim("d1")).Build()).AsInt64(); n != 0 {
		t.Fatal("the id claim outlived its deleted job")
	}
	if n, _ := c.Do(ctx, c.B().Hexists().Key(s.k.seqShard(j.Seq)).Field(seq).Build()).AsInt64(); n != 0 {
		t.Fatal("the seq entry outlived its deleted job")
	}
	if err := s.Put(ctx, []*delayq.Job{hjob("d1", "u")}); err != nil {
		t.Fatalf("Put of a deleted id into another topic = %v", err)
	}
}

// TestOneNodeWakeUpsOnlyWhenSomeoneListens: on one node a put's and a
// reserve's wake-ups are published only when a subscriber other than
// the instance itself listens on the events channel: one instance alone
// publishes nothing (it would only hear itself), and a second listener
// hears a put's earlier due time (a ready count needs a waiting mark
// besides: TestWakeUpsOnlyWhenAnotherInstanceWaits).
func TestOneNodeWakeUpsOnlyWhenSomeoneListens(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	s := openStore(t, addrs, Options{})
	defer s.Close()
	ctx := t.Context()
	deadline := time.Now().Add(10 * time.Second)
	for s.fan.own() != "1" { // its own subscription confirmed
		if time.Now().After(deadline) {
			t.Fatal("the store's event subscription was never confirmed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	published := func() int { return commandCalls(t, s, "publish") }
	// Nobody else listens on this deployment's channel (its prefix is
	// fresh); other tests' stores publish on their own channels, which
	// this count would include, so the test runs none beside it.
	before := published()
	for i := range 5 {
		now := delayq.TruncMilli(time.Now())
		j := &delayq.Job{ID: "alone" + strconv.Itoa(i), Topic: "t", Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
		if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	if got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 5, Now: time.Now(), By: "w"}))(t); len(got) != 5 {
		t.Fatalf("Reserve = %d jobs, want 5", len(got))
	}
	if n := published() - before; n != 0 {
		t.Fatalf("PUBLISH ran %d times for 5 puts and a reserve of an instance alone, want 0", n)
	}
	// A listener of its own: the next put wakes it.
	sub, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := bufio.NewReader(sub)
	if _, err := sub.Write([]byte("SUBSCRIBE " + s.k.events() + "\r\n")); err != nil {
		t.Fatal(err)
	}
	for range 6 { // *3 $9 subscribe $n channel :1
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	now := delayq.TruncMilli(time.Now())
	due := now.Add(30 * time.Second) // before the reserve's deadlines: it lowers the bucket's entry
	j := &delayq.Job{ID: "heard", Topic: "t", Body: []byte("x"), TTR: time.Minute, State: delayq.StateDelayed, Due: due, Created: now}
	if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	_ = sub.SetReadDeadline(time.Now().Add(10 * time.Second))
	want := s.opt.InstanceID + " - 0 " + strconv.FormatInt(due.UnixMilli(), 10)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the listener never heard the put (%v)", err)
		}
		if strings.TrimSpace(line) == want {
			break
		}
	}
}
