package redisstore

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestClusterRetainedSeqStaysInItsShard: on a Cluster a retained finish
// (alone, by deleteScript, and in a group, by deleteGroupScript; an id
// of a producer's and one the server made; finished, deleted and failed)
// leaves the job's seq -> topic entry in its seq shard, as one node
// does, writes no P:seqs:{n}:r:<seq> key and gives the ended indexes no
// TTL; another instance finds each job by seq and by id with its state.
// A job an earlier build retained (its entry moved to a key of its own,
// its index given a TTL) is read too. Once the retention has passed,
// the sweep removes the index members and the shard entries of the jobs
// whose window ended, keeps those of the job still in its window, and
// takes the earlier build's TTL off its index. Without retention a
// finish drops the entry at once. Before, a retained finish moved the
// entry to P:seqs:{n}:r:<seq> (one more script on the shard's master
// per group) and the sweep did not trim a Cluster's indexes.
func TestClusterRetainedSeqStaysInItsShard(t *testing.T) {
	const keep = time.Hour
	clk := &fakeClock{now: hbase}
	ss := retainingOn(t, "DELAYQ_TEST_REDIS_CLUSTER", 2, store.Retention{For: keep, Now: clk.Now})
	a, b := ss[0], ss[1]
	if a.oneNode {
		t.Fatal("a store on a Cluster takes the one-node path")
	}
	ctx, c := t.Context(), a.c
	p, g1, g2, g3, late, old := hjob("p", "t"), hjob("g1", "t"), hjob("g2", "t"), hjob("g3", "t"), hjob("late", "t"), hjob("old", "t")
	if err := a.Put(ctx, []*delayq.Job{p, g1, g2, g3, late, old}); err != nil {
		t.Fatal(err)
	}
	f := hjob(uuid.Must(uuid.NewV7()).String(), "t")
	if err := a.PutFresh(ctx, []*delayq.Job{f}); err != nil {
		t.Fatal(err)
	}
	got := ok(a.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 3, Now: hat(1), By: "w"}))(t)
	if len(got) != 3 || got[0].ID != "p" || got[1].ID != "g1" || got[2].ID != "g2" {
		t.Fatalf("Reserve = %v, want p, g1, g2", got)
	}
	// p finished alone (deleteScript), f deleted by its fresh id.
	ok(a.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "p", Reservation: got[0].Reservation}, Now: hat(2)}))(t)
	ok(a.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: f.ID}, Now: hat(2)}))(t)
	// g1 and g2 finished, g3 (buried) deleted, in one group
	// (deleteGroupScript).
	r3 := ok(a.ReserveJob(ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "g3"}, Now: hat(2)}))(t)
	ok(a.Bury(ctx, store.BuryParams{Ref: delayq.Ref{ID: "g3", Reservation: r3.Reservation}, Now: hat(2), Reason: "x"}))(t)
	finish := func(id, res string) *finishCall {
		ref := delayq.Ref{ID: id, Reservation: res}
		return &finishCall{t: ok(a.resolve(ctx, ref))(t), res: res, now: msString(hat(3)), ref: ref}
	}
	calls := []*finishCall{finish("g1", got[1].Reservation), finish("g2", got[2].Reservation), finish("g3", "")}
	a.writeFinishes(ctx, calls)
	for _, fc := range calls {
		if fc.err != nil || fc.rec.job == nil {
			t.Fatalf("group finish of %s = %v", fc.ref.ID, fc.err)
		}
	}
	// old: retained by this build, then left as an earlier build leaves
	// a retained job on a Cluster.
	ok(a.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "old"}, Now: hat(3)}))(t)
	tk := a.k.topic("t")
	px := strconv.FormatInt(keep.Milliseconds(), 10)
	for _, cmd := range [][]string{
		{"SET", a.k.retainedSeq(old.Seq), "t", "PX", px},
		{"HDEL", a.k.seqShard(old.Seq), strconv.FormatUint(old.Seq, 10)},
		{"PEXPIRE", tk[11], px},
	} {
		if err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}

	inShard := func(j *delayq.Job) bool {
		t.Helper()
		return ok(c.Do(ctx, c.B().Hexists().Key(a.k.seqShard(j.Seq)).Field(strconv.FormatUint(j.Seq, 10)).Build()).AsBool())(t)
	}
	want := map[*delayq.Job]delayq.State{p: delayq.StateFinished, f: delayq.StateDeleted, g1: delayq.StateFinished,
		g2: delayq.StateFinished, g3: delayq.StateFailed, old: delayq.StateDeleted}
	for j, st := range want {
		if j != old {
			if !inShard(j) {
				t.Errorf("seq %d of retained %s is not in its shard", j.Seq, j.ID)
			}
			if n := ok(c.Do(ctx, c.B().Exists().Key(a.k.retainedSeq(j.Seq)).Build()).AsInt64())(t); n != 0 {
				t.Errorf("%s exists: the retained job %s's entry moved to a key of its own", a.k.retainedSeq(j.Seq), j.ID)
			}
		}
		// b has seen none of the seqs: it finds them in Redis.
		for _, ref := range []delayq.Ref{{ID: j.ID}, {Seq: j.Seq}} {
			if g, err := b.Get(ctx, ref); err != nil || g.State != st || g.Seq != j.Seq {
				t.Errorf("Get(%v) on another instance = %+v, %v; want it %s", ref, g, err, st)
			}
		}
	}
	for _, i := range []int{10, 11, 12} {
		if ttl := ok(c.Do(ctx, c.B().Pttl().Key(tk[i]).Build()).AsInt64())(t); i != 11 && ttl != -1 {
			t.Errorf("PTTL %s = %d, want -1: the sweep trims it", tk[i], ttl)
		}
	}

	// late ends within the window that the others' end leaves behind.
	ok(a.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "late"}, Now: hat(keep.Milliseconds())}))(t)
	clk.Set(hat(keep.Milliseconds() + 10))
	if err := b.sweep(ctx, allBuckets(b)); err != nil {
		t.Fatal(err)
	}
	for j := range want {
		if inShard(j) {
			t.Errorf("seq %d of %s is still in its shard after its window and a sweep", j.Seq, j.ID)
		}
		if _, err := b.Get(ctx, delayq.Ref{Seq: j.Seq}); !errors.Is(err, delayq.ErrNotFound) {
			t.Errorf("Get(seq of %s) after its window = %v, want ErrNotFound", j.ID, err)
		}
	}
	for _, i := range []int{10, 12} {
		if n := ok(c.Do(ctx, c.B().Exists().Key(tk[i]).Build()).AsInt64())(t); n != 0 {
			t.Errorf("%s still there after its members' window and a sweep", tk[i])
		}
	}
	if m := ok(c.Do(ctx, c.B().Zrange().Key(tk[11]).Min("0").Max("-1").Build()).AsStrSlice())(t); len(m) != 1 || m[0] != pad20(late.Seq) {
		t.Errorf("deleted index after the sweep = %v, want late only", m)
	}
	if ttl := ok(c.Do(ctx, c.B().Pttl().Key(tk[11]).Build()).AsInt64())(t); ttl != -1 {
		t.Errorf("PTTL of the deleted index after the sweep = %d, want -1: the earlier build's TTL would drop late, not its seq entry", ttl)
	}
	if !inShard(late) {
		t.Error("the sweep dropped the seq entry of a job still in its window")
	}
	if g, err := b.Get(ctx, delayq.Ref{Seq: late.Seq}); err != nil || g.State != delayq.StateDeleted {
		t.Errorf("Get(seq of late) = %+v, %v; want it deleted", g, err)
	}

	// Without retention a finish drops the entry at once.
	none := retainingOn(t, "DELAYQ_TEST_REDIS_CLUSTER", 1, store.Retention{})[0]
	n1, n2 := hjob("n1", "t"), hjob(uuid.Must(uuid.NewV7()).String(), "t")
	if err := none.Put(ctx, []*delayq.Job{n1}); err != nil {
		t.Fatal(err)
	}
	if err := none.PutFresh(ctx, []*delayq.Job{n2}); err != nil {
		t.Fatal(err)
	}
	for _, j := range []*delayq.Job{n1, n2} {
		ok(none.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: j.ID}, Now: hat(1)}))(t)
		if ok(none.c.Do(ctx, none.c.B().Hexists().Key(none.k.seqShard(j.Seq)).Field(strconv.FormatUint(j.Seq, 10)).Build()).AsBool())(t) {
			t.Errorf("--retain 0: seq %d of %s still in its shard after its delete", j.Seq, j.ID)
		}
	}
}

// TestClusterSweepTrimsInRounds: on a Cluster one sweep trims an ended
// index of more members than one round takes (maxTrimPage), over
// several seq shards, with their shard entries, and keeps the members
// (and entries) of jobs still in their window. Before, the sweep did not
// trim a Cluster's indexes.
func TestClusterSweepTrimsInRounds(t *testing.T) {
	const keep = time.Hour
	clk := &fakeClock{now: hat(keep.Milliseconds() + 1000)}
	s := retainingOn(t, "DELAYQ_TEST_REDIS_CLUSTER", 1, store.Retention{For: keep, Now: clk.Now})[0]
	ctx, c := t.Context(), s.c
	// The index and shard entries as retained finishes leave them, and
	// the topic in the registry (no records: the trim reads none).
	const old, live = 2*maxTrimPage + 100, 10
	base := uint64(1) << 40
	idx := s.k.topic("t")[10]
	zadd := []string{"ZADD", idx}
	shards := map[string][]string{}
	for i := range old + live {
		seq := base + uint64(i)*3 // about 2 seqs in 3 per shard
		at := hat(int64(i % 500))
		if i >= old {
			at = clk.Now()
		}
		zadd = append(zadd, msString(at), pad20(seq))
		sh := s.k.seqShard(seq)
		shards[sh] = append(shards[sh], strconv.FormatUint(seq, 10), "t")
	}
	if len(shards) < 2 {
		t.Fatalf("%d seq shards, want several", len(shards))
	}
	cmds := []rueidisCmd{zadd, {"SADD", s.k.topics(), "t"}}
	for sh, fv := range shards {
		cmds = append(cmds, append([]string{"HSET", sh}, fv...))
	}
	for _, cmd := range cmds {
		if err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.sweep(ctx, allBuckets(s)); err != nil {
		t.Fatal(err)
	}
	left := ok(c.Do(ctx, c.B().Zrange().Key(idx).Min("0").Max("-1").Build()).AsStrSlice())(t)
	if len(left) != live || left[0] != pad20(base+uint64(old)*3) {
		t.Fatalf("finished index after one sweep: %d members from %v, want the %d in their window", len(left), left[:min(len(left), 1)], live)
	}
	n := 0
	for sh := range shards {
		n += int(ok(c.Do(ctx, c.B().Hlen().Key(sh).Build()).AsInt64())(t))
	}
	if n != live {
		t.Fatalf("%d seq entries left in the shards after one sweep, want the %d in their window", n, live)
	}
}

// rueidisCmd is one command's words.
type rueidisCmd = []string
