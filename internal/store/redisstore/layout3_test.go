package redisstore

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestLayout2ClusterSeqEntriesRead: a Cluster deployment of format 2
// (every seq entry in its untagged shard, P:seqs:{n}) is upgraded in
// place by the first instance of format 3, which records from which seq
// on the entries are in tagged shards: past every seq of the earlier
// jobs. Another instance, with no memory of their seqs, then finds the
// earlier jobs by id and by seq, reserves and deletes them (their
// entries go from the untagged shards), and a new put's entry is in a
// tagged shard.
func TestLayout2ClusterSeqEntriesRead(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")
	old := openStore(t, addrs, quietLeases)
	ctx, c, k := t.Context(), old.c, old.k
	var jobs []*delayq.Job
	for _, topic := range []string{"a", "b", "c", "d"} {
		j := readyIn(nonce(), topic)
		if err := old.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	defer old.Close() // its client rewrites the deployment below; it puts nothing more
	// Rewrite the deployment as format 2 left it.
	do := func(cmd string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", cmd, err)
		}
	}
	for _, j := range jobs {
		seq := strconv.FormatUint(j.Seq, 10)
		do("HDEL", c.Do(ctx, c.B().Hdel().Key(k.seqShard(j.Seq)).Field(seq).Build()).Error())
		do("HSET", c.Do(ctx, c.B().Hset().Key(k.untaggedShard(j.Seq)).FieldValue().FieldValue(seq, j.Topic).Build()).Error())
	}
	do("HDEL meta", c.Do(ctx, c.B().Hdel().Key(k.meta()).Field("seqtags").Build()).Error())
	do("HSET meta", c.Do(ctx, c.B().Hset().Key(k.meta()).FieldValue().FieldValue("format", "2").Build()).Error())

	up := openStore(t, addrs, Options{Prefix: k.prefix, LeaseTTL: time.Hour, InstanceID: "up"})
	defer up.Close()
	if f := ok(c.Do(ctx, c.B().Hget().Key(k.meta()).Field("format").Build()).ToString())(t); f != layoutFormat {
		t.Fatalf("meta format after the first instance of format 3 = %q, want %q", f, layoutFormat)
	}
	from := ok(c.Do(ctx, c.B().Hget().Key(k.meta()).Field("seqtags").Build()).AsUint64())(t)
	for _, j := range jobs {
		if j.Seq >= from {
			t.Fatalf("seqtags %d recorded at the upgrade is not past the earlier seq %d", from, j.Seq)
		}
	}
	if !up.k.tagged || up.k.tagsFrom != from {
		t.Fatalf("upgraded instance's keys: tagged %v from %d, want from %d", up.k.tagged, up.k.tagsFrom, from)
	}

	other := openStore(t, addrs, Options{Prefix: k.prefix, LeaseTTL: time.Hour, InstanceID: "other"})
	defer other.Close()
	for _, j := range jobs {
		for _, ref := range []delayq.Ref{{ID: j.ID}, {Seq: j.Seq}} {
			if got, err := other.Get(ctx, ref); err != nil || got.ID != j.ID || got.Topic != j.Topic {
				t.Errorf("Get(%+v) of a format 2 job = %v, %v", ref, got, err)
			}
		}
		got := ok(other.Reserve(ctx, store.ReserveParams{Topics: []string{j.Topic}, Max: 1, Now: time.Now(), By: "me"}))(t)
		if len(got) != 1 || got[0].Seq != j.Seq {
			t.Fatalf("Reserve(%s) = %+v, want seq %d", j.Topic, got, j.Seq)
		}
		ok(other.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: j.Seq, Reservation: got[0].Reservation}, Now: time.Now()}))(t)
		seq := strconv.FormatUint(j.Seq, 10)
		if n := ok(c.Do(ctx, c.B().Hexists().Key(k.untaggedShard(j.Seq)).Field(seq).Build()).AsBool())(t); n {
			t.Errorf("the untagged entry of deleted seq %d stays", j.Seq)
		}
	}
	j := readyIn(nonce(), "a")
	if err := up.PutFresh(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	if sh := up.k.seqShard(j.Seq); !strings.Contains(sh, ":seqs:{s") {
		t.Errorf("a format 3 put's seq %d is in %s, want a tagged shard", j.Seq, sh)
	}
	if got, err := other.Get(ctx, delayq.Ref{Seq: j.Seq}); err != nil || got.ID != j.ID {
		t.Errorf("Get(seq %d) of a format 3 job by another instance = %v, %v", j.Seq, got, err)
	}
}

// TestOneNodeRefusesATaggedDeployment: one Redis server does not open a
// deployment a Cluster wrote in format 3 (its one-node scripts name only
// the untagged seq shards), and says why; the deployment is unchanged.
func TestOneNodeRefusesATaggedDeployment(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	first := openStore(t, addrs, Options{})
	defer first.Close()
	prefix, c, k := first.opt.Prefix, first.c, first.k
	ctx := t.Context()
	if err := c.Do(ctx, c.B().Hset().Key(k.meta()).FieldValue().FieldValue("seqtags", "12345").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, err := New(ctx, Options{Addrs: addrs, Prefix: prefix})
	if err == nil || !strings.Contains(err.Error(), "written by a Redis Cluster") {
		t.Fatalf("New on one node of a tagged deployment = %v, want a refusal naming the Cluster", err)
	}
	if f := ok(c.Do(ctx, c.B().Hget().Key(k.meta()).Field("seqtags").Build()).ToString())(t); f != "12345" {
		t.Errorf("seqtags after the refusal = %q", f)
	}
}
