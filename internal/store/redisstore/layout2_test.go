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
