package redisstore

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestLayout2FullRecordsRead: a record key layout 2 wrote before its
// records left out the fields at their zero (every field there, counts
// of "0", empty reservation, deadline and history, as an instance of
// that build left a job it had put, or reserved with hist "" and hn
// "0") is read, reserved, released, touched and finished by this build,
// and the records it then writes read back the same.
func TestLayout2FullRecordsRead(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{Retention: store.Retention{For: time.Hour}})
	defer s.Close()
	ctx, c := t.Context(), s.c
	now := delayq.TruncMilli(time.Now())
	job := func(id string) *delayq.Job {
		return &delayq.Job{ID: id, Topic: "t", Body: []byte("body of " + id), TTR: 10 * time.Second, MaxAttempts: 3,
			State: delayq.StateReady, Due: now, Created: now}
	}
	a, b := job("a"), job("b")
	if err := s.Put(ctx, []*delayq.Job{a, b}); err != nil {
		t.Fatal(err)
	}
	// Rewrite both records as the earlier build packed them: b as it
	// left a reserved job.
	tk := s.k.topic("t")
	full := func(j *delayq.Job, extra ...string) {
		t.Helper()
		key := tk[0] + strconv.FormatUint(j.Seq, 10)
		claim := ok(decodeJob(ok(c.Do(ctx, c.B().Get().Key(key).Build()).ToMessage())(t)))(t).claim
		kv := append(jobFieldsFull(j), "seq", strconv.FormatUint(j.Seq, 10), "claim", claim)
		kv = append(kv, extra...)
		if err := c.Do(ctx, c.B().Set().Key(key).Value(string(appendPacked(nil, kv, 0))).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	full(a)
	if g := ok(s.Get(ctx, delayq.Ref{ID: "a"}))(t); g.Attempts != 0 || g.Reservation != "" || !g.Deadline.IsZero() || g.MaxAttempts != 3 || string(g.Body) != "body of a" {
		t.Fatalf("Get(a) of a full record = %+v", g)
	}
	got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 1, Now: time.Now(), By: "me"}))(t)
	if len(got) != 1 || got[0].ID != "a" || got[0].Attempts != 1 || len(got[0].History) != 1 {
		t.Fatalf("Reserve of a full record = %+v, want a's first attempt", got)
	}
	ok(s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: "a", Reservation: got[0].Reservation}, Now: time.Now(), Due: time.Now()}))(t)
	if g := ok(s.Get(ctx, delayq.Ref{ID: "a"}))(t); g.Releases != 1 || g.Reservation != "" || !g.Deadline.IsZero() || len(g.History) != 1 || g.History[0].Outcome != delayq.OutcomeReleased {
		t.Fatalf("Get(a) after a release = %+v", g)
	}
	// b reserved by the earlier build: attempt 1 in progress, empty history.
	bres := strconv.FormatUint(b.Seq, 10) + "-1"
	deadline := time.Now().Add(time.Minute)
	b.State, b.Attempts, b.Reservation, b.Deadline = delayq.StateReserved, 1, bres, delayq.CeilMilli(deadline)
	full(b, "cur", "1,"+msString(now)+",2:me", "hist", "", "hn", "0")
	if err := c.Do(ctx, c.B().Zrem().Key(tk[2]).Member(rmember(b)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Zrem().Key(tk[3]).Member(pad20(b.Seq)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := c.Do(ctx, c.B().Zadd().Key(tk[5]).ScoreMember().ScoreMember(float64(ms(b.Deadline)), pad20(b.Seq)).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	ok(s.Touch(ctx, store.TouchParams{Ref: delayq.Ref{Seq: b.Seq, Reservation: bres}, Now: time.Now()}))(t)
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: b.Seq, Reservation: bres}, Now: time.Now()}))(t)
	g := ok(s.Get(ctx, delayq.Ref{ID: "b"}))(t)
	if g.State != delayq.StateFinished || g.Attempts != 1 || g.Reservation != "" || len(g.History) != 1 || g.History[0].Outcome != delayq.OutcomeFinished || g.History[0].By != "me" {
		t.Fatalf("Get(b) after finishing an earlier build's reservation = %+v", g)
	}
	if err := s.Put(ctx, []*delayq.Job{job("b")}); !errors.Is(err, delayq.ErrExists) {
		t.Fatalf("Put of b while it is retained = %v, want ErrExists", err)
	}
	if l := ok(s.List(ctx, store.ListParams{Topic: "t", State: delayq.StateFinished}))(t); len(l.Jobs) != 1 || l.Jobs[0].ID != "b" {
		t.Fatalf("List(finished) = %+v, want b", l.Jobs)
	}
}

// rmember is j's member of its topic's ready index.
func rmember(j *delayq.Job) string {
	return strconv.FormatUint(uint64(j.Priority)+10000000000, 10)[1:] + pad20(j.Seq)
}

// TestLayout2RetainedEntriesRead: a job retained on one node by the
// build before retained jobs kept their seq entry in its shard (its
// entry moved to P:seqs:{n}:r:<seq> with the retention as TTL, and its
// ended index had the retention as TTL) is read by id and by seq,
// listed, and keeps its id for the window; the sweep then trims it from
// the index, takes the earlier build's TTL off the index (which would
// otherwise drop the members this build added, whose entries only the
// trim removes), and trims this build's retained job once its window
// ends, with its seq's entry.
func TestLayout2RetainedEntriesRead(t *testing.T) {
	clk := &fakeClock{now: hat(0)}
	s := retaining(t, 1, store.Retention{For: time.Hour, Now: clk.Now})[0]
	ctx, c := t.Context(), s.c
	a, b := hjob("a", "t"), hjob("b", "t")
	if err := s.Put(ctx, []*delayq.Job{a, b}); err != nil {
		t.Fatal(err)
	}
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "a"}, Now: hat(1)}))(t)
	// a as the earlier build left it.
	tk, seqA := s.k.topic("t"), strconv.FormatUint(a.Seq, 10)
	for _, cmd := range [][]string{
		{"SET", s.k.retainedSeq(a.Seq), "t", "PX", "3600000"},
		{"HDEL", s.k.seqShard(a.Seq), seqA},
		{"PEXPIRE", tk[11], "3600000"},
	} {
		if err := c.Do(ctx, c.B().Arbitrary(cmd...).Build()).Error(); err != nil {
			t.Fatal(err)
		}
	}
	for _, ref := range []delayq.Ref{{ID: "a"}, {Seq: a.Seq}} {
		if g := ok(s.Get(ctx, ref))(t); g.State != delayq.StateDeleted || g.Seq != a.Seq {
			t.Fatalf("Get(%v) of the earlier build's retained job = %+v", ref, g)
		}
	}
	var ex *delayq.ExistsError
	if err := s.Put(ctx, []*delayq.Job{hjob("a", "other")}); !errors.As(err, &ex) || ex.State != delayq.StateDeleted {
		t.Fatalf("Put of a within its window = %v, want ExistsError{deleted}", err)
	}
	clk.Set(hat(time.Hour.Milliseconds() / 2))
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "b"}, Now: clk.Now()}))(t)
	if l := ok(s.List(ctx, store.ListParams{Topic: "t", State: delayq.StateDeleted}))(t); len(l.Jobs) != 2 || l.Jobs[0].ID != "a" || l.Jobs[1].ID != "b" {
		t.Fatalf("List(deleted) = %v, want a then b", l.Jobs)
	}
	// Past a's window the sweep trims it and takes the TTL off the index.
	clk.Set(hat(time.Hour.Milliseconds() + 2))
	if err := s.sweep(ctx, allBuckets(s)); err != nil {
		t.Fatal(err)
	}
	if m := ok(c.Do(ctx, c.B().Zrange().Key(tk[11]).Min("0").Max("-1").Build()).AsStrSlice())(t); len(m) != 1 || m[0] != pad20(b.Seq) {
		t.Fatalf("deleted index after a's window = %v, want b only", m)
	}
	if ttl := ok(c.Do(ctx, c.B().Pttl().Key(tk[11]).Build()).AsInt64())(t); ttl != -1 {
		t.Fatalf("PTTL of the index after the sweep = %d, want -1: the earlier build's TTL would drop b", ttl)
	}
	if _, err := s.Get(ctx, delayq.Ref{Seq: a.Seq}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get(seq of a) past its window = %v, want ErrNotFound", err)
	}
	if err := s.Put(ctx, []*delayq.Job{hjob("a", "other")}); err != nil {
		t.Fatalf("Put of a past its window = %v", err)
	}
	if g := ok(s.Get(ctx, delayq.Ref{Seq: b.Seq}))(t); g.State != delayq.StateDeleted {
		t.Fatalf("Get(seq of b) = %+v", g)
	}
	// Past b's window the sweep drops the index and b's seq entry.
	clk.Set(hat(2 * time.Hour.Milliseconds()))
	if err := s.sweep(ctx, allBuckets(s)); err != nil {
		t.Fatal(err)
	}
	if n := ok(c.Do(ctx, c.B().Exists().Key(tk[11]).Build()).AsInt64())(t); n != 0 {
		t.Fatal("the deleted index is still there past its last member's window")
	}
	if n := ok(c.Do(ctx, c.B().Hexists().Key(s.k.seqShard(b.Seq)).Field(strconv.FormatUint(b.Seq, 10)).Build()).AsBool())(t); n {
		t.Fatal("b's seq entry is still in its shard past its window")
	}
}
