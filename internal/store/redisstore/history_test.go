package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// These tests check the Redis side of job history (attempts, retained
// jobs, the idempotency window): what the shared conformance suite
// cannot see, such as two instances on one Redis and the TTLs that let
// Redis drop retained jobs by itself.

// fakeClock is a retention clock the test moves by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// hbase is the tests' base time, on a millisecond.
var hbase = time.Date(2031, time.May, 6, 7, 8, 9, 123_000_000, time.UTC)

func hat(ms int64) time.Time { return hbase.Add(time.Duration(ms) * time.Millisecond) }

func hjob(id, topic string) *delayq.Job {
	return &delayq.Job{ID: id, Topic: topic, Body: []byte("body of " + id), TTR: 10 * time.Second,
		State: delayq.StateReady, Due: hbase, Created: hbase}
}

// retaining opens n stores sharing one fresh prefix (n instances of one
// deployment) with retention r.
func retaining(t *testing.T, n int, r store.Retention) []*Store {
	t.Helper()
	return retainingOn(t, "DELAYQ_TEST_REDIS", n, r)
}

// retainingOn is retaining on the Redis named by env.
func retainingOn(t *testing.T, env string, n int, r store.Retention) []*Store {
	t.Helper()
	addrs := redisAddrs(t, env)
	prefix := "t" + nonce()
	var out []*Store
	for range n {
		s := openStore(t, addrs, Options{Prefix: prefix, Retention: r})
		t.Cleanup(func() { s.Close() })
		out = append(out, s)
	}
	return out
}

// ok returns v, or fails the test that calls the result when err is set.
func ok[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestHistoryEveryOutcome(t *testing.T) {
	clk := &fakeClock{now: hbase}
	s := retaining(t, 1, store.Retention{For: time.Hour, Now: clk.Now})[0]
	ctx := t.Context()
	j := hjob("h", "t")
	j.MaxAttempts = 0
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	reserve := func(now int64, by string) *delayq.Job {
		t.Helper()
		js := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 1, Now: hat(now), By: by}))(t)
		if len(js) != 1 {
			t.Fatalf("Reserve at %d = %d jobs, want 1", now, len(js))
		}
		return js[0]
	}
	r := reserve(10, "alice")
	ok(s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: "h", Reservation: r.Reservation}, Now: hat(20), Due: hat(20), Reason: "busy, try later"}))(t)
	r = ok(s.ReserveJob(ctx, store.ReserveJobParams{Ref: delayq.Ref{Seq: j.Seq}, Now: hat(30), By: "conn 7"}))(t)
	ok(s.Bury(ctx, store.BuryParams{Ref: delayq.Ref{ID: "h", Reservation: r.Reservation}, Now: hat(40), Reason: "bad input"}))(t)
	ok(s.KickJob(ctx, store.KickJobParams{Ref: delayq.Ref{ID: "h"}, Now: hat(50)}))(t)
	r = reserve(60, "bob")
	ttrEnd := r.Deadline // bob's attempt ends when its TTR runs out, however late Tick runs
	ok(s.Tick(ctx, store.TickParams{Now: ttrEnd.Add(time.Second)}))(t)
	carolAt := ttrEnd.Add(2 * time.Second)
	r = reserve(carolAt.Sub(hbase).Milliseconds(), "carol")
	g := ok(s.GiveBack(ctx, store.GiveBackParams{Ref: delayq.Ref{ID: "h", Reservation: r.Reservation}}))(t)
	if g.Attempts != 3 {
		t.Fatalf("Attempts after GiveBack = %d, want 3 (the given-back attempt taken back)", g.Attempts)
	}
	daveAt := ttrEnd.Add(5 * time.Second)
	r = reserve(daveAt.Sub(hbase).Milliseconds(), "dave")
	finishAt := ttrEnd.Add(6 * time.Second)
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "h", Reservation: r.Reservation}, Now: finishAt}))(t)

	got := ok(s.Get(ctx, delayq.Ref{ID: "h"}))(t)
	want := []delayq.Attempt{
		{N: 1, Reserved: hat(10), By: "alice", Ended: hat(20), Outcome: delayq.OutcomeReleased, Reason: "busy, try later"},
		{N: 2, Reserved: hat(30), By: "conn 7", Ended: hat(40), Outcome: delayq.OutcomeBuried, Reason: "bad input"},
		{N: 3, Reserved: hat(60), By: "bob", Ended: ttrEnd, Outcome: delayq.OutcomeTTRExpired, Reason: delayq.ReasonTTRExpired},
		{N: 4, Reserved: carolAt, By: "carol", Ended: carolAt, Outcome: delayq.OutcomeGaveBack},
		{N: 4, Reserved: daveAt, By: "dave", Ended: finishAt, Outcome: delayq.OutcomeFinished},
	}
	if diff := cmp.Diff(want, got.History); diff != "" {
		t.Fatalf("History (-want +got):\n%s", diff)
	}
	if got.State != delayq.StateFinished || !got.Ended.Equal(finishAt) || got.Body != nil || got.Reservation != "" || !got.Deadline.IsZero() {
		t.Fatalf("retained job = state %s ended %v body %q res %q deadline %v; want finished at %v, no body, no reservation",
			got.State, got.Ended, got.Body, got.Reservation, got.Deadline, finishAt)
	}
}

// TestHistoryKeepsTheLast20: 25 attempts leave the most recent 20, and a
// by and a reason holding the encoding's separators read back whole.
func TestHistoryKeepsTheLast20(t *testing.T) {
	s := retaining(t, 1, store.Retention{})[0]
	ctx := t.Context()
	j := hjob("cap", "t")
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	for i := range 25 {
		now := hat(int64(10 * i))
		js := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 1, Now: now, By: fmt.Sprintf("c,%d:x", i)}))(t)
		ok(s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: "cap", Reservation: js[0].Reservation},
			Now: now.Add(time.Millisecond), Due: now, Reason: fmt.Sprintf("r:%d,,3:", i)}))(t)
	}
	got := ok(s.Get(ctx, delayq.Ref{ID: "cap"}))(t)
	if len(got.History) != delayq.MaxHistory {
		t.Fatalf("len(History) = %d, want %d", len(got.History), delayq.MaxHistory)
	}
	for k, a := range got.History {
		i := k + 5
		want := delayq.Attempt{N: i + 1, Reserved: hat(int64(10 * i)), By: fmt.Sprintf("c,%d:x", i),
			Ended: hat(int64(10*i) + 1), Outcome: delayq.OutcomeReleased, Reason: fmt.Sprintf("r:%d,,3:", i)}
		if diff := cmp.Diff(want, a); diff != "" {
			t.Fatalf("History[%d] (-want +got):\n%s", k, diff)
		}
	}
}

// TestRetainedAcrossInstances: a job finished through one instance is
// readable through another by id and seq, listed there, and its id is
// refused there (in another topic too) until the retention ends by the
// clock; then the id is free again.
func TestRetainedAcrossInstances(t *testing.T) {
	for _, env := range []string{"DELAYQ_TEST_REDIS", "DELAYQ_TEST_REDIS_CLUSTER"} {
		t.Run(env, func(t *testing.T) { testRetainedAcrossInstances(t, env) })
	}
}

func testRetainedAcrossInstances(t *testing.T, env string) {
	clk := &fakeClock{now: hbase}
	ss := retainingOn(t, env, 2, store.Retention{For: time.Hour, Now: clk.Now})
	a, b := ss[0], ss[1]
	ctx := t.Context()
	j := hjob("x", "ta")
	if err := a.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	r := ok(a.Reserve(ctx, store.ReserveParams{Topics: []string{"ta"}, Max: 1, Now: hat(1), By: "w"}))(t)[0]
	ok(a.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "x", Reservation: r.Reservation}, Now: hat(2)}))(t)

	for _, topic := range []string{"ta", "tb"} {
		again := hjob("x", topic)
		err := b.Put(ctx, []*delayq.Job{again})
		var ex *delayq.ExistsError
		if !errors.As(err, &ex) || ex.ID != "x" || ex.State != delayq.StateFinished || !errors.Is(err, delayq.ErrExists) {
			t.Fatalf("Put of a finished id into %s on the other instance = %v, want *ExistsError{x, finished}", topic, err)
		}
	}
	for _, ref := range []delayq.Ref{{ID: "x"}, {Seq: j.Seq}} {
		got, err := b.Get(ctx, ref)
		if err != nil || got.State != delayq.StateFinished || got.Seq != j.Seq || !got.Ended.Equal(hat(2)) {
			t.Fatalf("Get(%v) on the other instance = %+v, %v; want the finished job", ref, got, err)
		}
	}
	l := ok(b.List(ctx, store.ListParams{Topic: "ta", State: delayq.StateFinished}))(t)
	if len(l.Jobs) != 1 || l.Jobs[0].ID != "x" {
		t.Fatalf("List(finished) on the other instance = %v", l.Jobs)
	}
	if l := ok(b.List(ctx, store.ListParams{Topic: "ta"}))(t); len(l.Jobs) != 0 {
		t.Fatalf("List(live) = %d jobs, want none: a retained job is not live", len(l.Jobs))
	}
	for _, st := range ok(b.Topics(ctx))(t) {
		t.Fatalf("Topics lists %+v; a topic with only retained jobs has none live", st)
	}
	// every transition treats it as absent, by id and by seq
	for _, ref := range []delayq.Ref{{ID: "x", Reservation: r.Reservation}, {Seq: j.Seq, Reservation: r.Reservation}} {
		for name, call := range map[string]func() error{
			"Release": func() error {
				_, err := b.Release(ctx, store.ReleaseParams{Ref: ref, Now: hat(3), Due: hat(3)})
				return err
			},
			"Touch":      func() error { _, err := b.Touch(ctx, store.TouchParams{Ref: ref, Now: hat(3)}); return err },
			"Bury":       func() error { _, err := b.Bury(ctx, store.BuryParams{Ref: ref, Now: hat(3)}); return err },
			"GiveBack":   func() error { _, err := b.GiveBack(ctx, store.GiveBackParams{Ref: ref}); return err },
			"KickJob":    func() error { _, err := b.KickJob(ctx, store.KickJobParams{Ref: ref, Now: hat(3)}); return err },
			"ReserveJob": func() error { _, err := b.ReserveJob(ctx, store.ReserveJobParams{Ref: ref, Now: hat(3)}); return err },
			"Update": func() error {
				_, err := b.Update(ctx, store.UpdateParams{Ref: ref, Now: hat(3), Body: []byte("n")})
				return err
			},
			"Delete": func() error {
				_, err := b.Delete(ctx, store.DeleteParams{Ref: ref, Force: true, Now: hat(3)})
				return err
			},
		} {
			if err := call(); !errors.Is(err, delayq.ErrNotFound) {
				t.Fatalf("%s(%v) of a retained job = %v, want ErrNotFound", name, ref, err)
			}
		}
	}

	// One millisecond before the end it is still there; at the end it is gone.
	clk.Set(hat(2).Add(time.Hour - time.Millisecond))
	if _, err := b.Get(ctx, delayq.Ref{ID: "x"}); err != nil {
		t.Fatalf("Get 1 ms before the retention ends = %v", err)
	}
	clk.Set(hat(2).Add(time.Hour))
	for _, ref := range []delayq.Ref{{ID: "x"}, {Seq: j.Seq}} {
		if _, err := b.Get(ctx, ref); !errors.Is(err, delayq.ErrNotFound) {
			t.Fatalf("Get(%v) once the retention ended = %v, want ErrNotFound", ref, err)
		}
	}
	if l := ok(b.List(ctx, store.ListParams{Topic: "ta", State: delayq.StateFinished}))(t); len(l.Jobs) != 0 {
		t.Fatalf("List(finished) once the retention ended = %v, want none", l.Jobs)
	}
	fresh := hjob("x", "tb")
	if err := b.Put(ctx, []*delayq.Job{fresh}); err != nil {
		t.Fatalf("Put of the id once the retention ended = %v", err)
	}
	if got := ok(a.Get(ctx, delayq.Ref{ID: "x"}))(t); got.State != delayq.StateReady || got.Topic != "tb" {
		t.Fatalf("Get after the new put = %s in %s, want the new ready job in tb", got.State, got.Topic)
	}
}

// TestRetainedStatesAndOrder: the state a delete leaves (finished,
// deleted, failed), bodies kept when asked, and List by ended then seq,
// page by page.
func TestRetainedStatesAndOrder(t *testing.T) {
	clk := &fakeClock{now: hbase}
	s := retaining(t, 1, store.Retention{For: time.Hour, Bodies: true, Now: clk.Now})[0]
	ctx := t.Context()
	var jobs []*delayq.Job
	for i := range 6 {
		jobs = append(jobs, hjob("j"+strconv.Itoa(i), "t"))
	}
	if err := s.Put(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	// j2 then j1 deleted while ready at 10, then j0 at 30: listed j1, j2
	// (same ended: by seq), then j0 (ended later, though its seq is lowest)
	for _, d := range []struct {
		id string
		at int64
	}{{"j2", 10}, {"j1", 10}, {"j0", 30}} {
		ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: d.id}, Now: hat(d.at)}))(t)
	}
	// j3 buried then deleted: failed
	r := ok(s.ReserveJob(ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "j3"}, Now: hat(40)}))(t)
	ok(s.Bury(ctx, store.BuryParams{Ref: delayq.Ref{ID: "j3", Reservation: r.Reservation}, Now: hat(41), Reason: "x"}))(t)
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "j3"}, Now: hat(42)}))(t)
	// j4 reserved, deleted by force without its reservation: deleted, attempt "deleted"
	ok(s.ReserveJob(ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "j4"}, Now: hat(50), By: "w"}))(t)
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "j4"}, Force: true, Now: hat(51)}))(t)

	var order []string
	cur := ""
	for {
		l := ok(s.List(ctx, store.ListParams{Topic: "t", State: delayq.StateDeleted, Limit: 1, Cursor: cur}))(t)
		for _, j := range l.Jobs {
			order = append(order, j.ID)
			if string(j.Body) != "body of "+j.ID {
				t.Fatalf("retained %s body = %q, want it kept (Bodies)", j.ID, j.Body)
			}
		}
		if cur = l.Next; cur == "" {
			break
		}
	}
	if diff := cmp.Diff([]string{"j1", "j2", "j0", "j4"}, order); diff != "" {
		t.Fatalf("List(deleted) order by ended then seq (-want +got):\n%s", diff)
	}
	f := ok(s.List(ctx, store.ListParams{Topic: "t", State: delayq.StateFailed}))(t)
	if len(f.Jobs) != 1 || f.Jobs[0].ID != "j3" || f.Jobs[0].Buries != 1 || f.Jobs[0].LastReason != "x" {
		t.Fatalf("List(failed) = %+v, want j3 as it was buried", f.Jobs)
	}
	j4 := ok(s.Get(ctx, delayq.Ref{ID: "j4"}))(t)
	if n := len(j4.History); n != 1 || j4.History[0].Outcome != delayq.OutcomeDeleted || !j4.History[0].Ended.Equal(hat(51)) {
		t.Fatalf("j4 History = %+v, want its attempt ended deleted at 51", j4.History)
	}
	if st := ok(s.TopicStats(ctx, "t"))(t); st.Total() != 1 {
		t.Fatalf("TopicStats total = %d, want 1 (j5): retained jobs are not counted", st.Total())
	}
}

// TestRetainedKeysExpireByThemselves: every key a retained job adds has
// the retention as its TTL, so Redis removes it with no scan; the state
// index is trimmed to the window on each write; and a store without
// retention leaves nothing behind.
func TestRetainedKeysExpireByThemselves(t *testing.T) {
	const keep = time.Hour
	s := retaining(t, 1, store.Retention{For: keep})[0]
	ctx := t.Context()
	j := hjob("k", "t")
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "k"}, Now: hat(0)}))(t)
	tk := s.k.topic("t")
	seq := strconv.FormatUint(j.Seq, 10)
	for _, key := range []string{tk[0] + seq, s.k.claim("k")} {
		ttl := ok(s.c.Do(ctx, s.c.B().Pttl().Key(key).Build()).AsInt64())(t)
		if ttl <= 0 || ttl > keep.Milliseconds() {
			t.Fatalf("PTTL %s = %d, want within (0, %d]", key, ttl, keep.Milliseconds())
		}
	}
	// On one node the ended index has no TTL (its trim drops its
	// members' seq entries: trimEnded), and the seq's entry stays in
	// its shard rather than moving to a key of its own.
	if ttl := ok(s.c.Do(ctx, s.c.B().Pttl().Key(tk[11]).Build()).AsInt64())(t); ttl != -1 {
		t.Fatalf("PTTL %s = %d, want -1 (no TTL on one node)", tk[11], ttl)
	}
	if n := ok(s.c.Do(ctx, s.c.B().Exists().Key(s.k.retainedSeq(j.Seq)).Build()).AsInt64())(t); n != 0 {
		t.Fatalf("one node: %s exists, want the seq's entry left in its shard", s.k.retainedSeq(j.Seq))
	}
	if topic := ok(s.c.Do(ctx, s.c.B().Hget().Key(s.k.seqShard(j.Seq)).Field(seq).Build()).ToString())(t); topic != "t" {
		t.Fatalf("the seq shard's entry of the retained job = %q, want t", topic)
	}
	// On one node the retained claim names the seq, so the retained job
	// needs no id -> seq key of its own (a Cluster's topic script cannot
	// read the claim, another slot, and keeps P:{t}:r:<id>).
	if claim := ok(s.c.Do(ctx, s.c.B().Get().Key(s.k.claim("k")).Build()).ToString())(t); !strings.HasSuffix(claim, "|"+seq) {
		t.Fatalf("retained claim = %q, want it to name seq %s", claim, seq)
	}
	if n := ok(s.c.Do(ctx, s.c.B().Exists().Key(tk[9]+"k").Build()).AsInt64())(t); n != 0 {
		t.Fatalf("one node: %s exists, want no id -> seq key for a retained job", tk[9]+"k")
	}
	// Deletes past the window trim the earlier member from the index: one
	// delete in trimEvery does (by seq; an instance's seqs are consecutive
	// within its block, so within trimEvery of them, or twice that when
	// the block runs out in between).
	every, _ := strconv.Atoi(trimEvery)
	var want []string
	for i := 0; i < 4*every && (i == 0 || ok(strconv.Atoi(want[len(want)-1]))(t)%every != 0); i++ {
		j2 := hjob(fmt.Sprintf("k2-%d", i), "t")
		if err := s.Put(ctx, []*delayq.Job{j2}); err != nil {
			t.Fatal(err)
		}
		ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: j2.ID}, Now: hat(keep.Milliseconds())}))(t)
		want = append(want, fmt.Sprintf("%020d", j2.Seq))
	}
	members := ok(s.c.Do(ctx, s.c.B().Zrange().Key(tk[11]).Min("0").Max("-1").Build()).AsStrSlice())(t)
	if !cmp.Equal(members, want) {
		t.Fatalf("deleted index after %d deletes past the window = %v, want %v (the member a retention old trimmed)", len(want), members, want)
	}
	if n := ok(s.c.Do(ctx, s.c.B().Hexists().Key(s.k.seqShard(j.Seq)).Field(seq).Build()).AsBool())(t); n {
		t.Fatal("the trim left the trimmed job's seq entry in its shard")
	}

	// With a short real retention Redis drops every key by itself.
	short := retaining(t, 1, store.Retention{For: 50 * time.Millisecond})[0]
	j3 := hjob("gone", "t")
	if err := short.Put(ctx, []*delayq.Job{j3}); err != nil {
		t.Fatal(err)
	}
	ok(short.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "gone"}, Now: time.Now()}))(t)
	// Redis drops the record and the claim; the sweep (every
	// sweepEvery) trims the index and the seq's entry of a topic that
	// ends nothing more.
	waitExpired(t, short, short.k.topic("t")[0]+strconv.FormatUint(j3.Seq, 10), short.k.claim("gone"))
	if err := short.sweep(ctx, allBuckets(short)); err != nil {
		t.Fatal(err)
	}
	waitNoKeys(t, short, "the retained job's")
	// Without retention a delete leaves no key of the job at all.
	none := retaining(t, 1, store.Retention{})[0]
	j4 := hjob("none", "t")
	if err := none.Put(ctx, []*delayq.Job{j4}); err != nil {
		t.Fatal(err)
	}
	ok(none.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "none"}, Now: hat(0)}))(t)
	if _, err := none.Get(ctx, delayq.Ref{ID: "none"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get after a delete without retention = %v, want ErrNotFound", err)
	}
	waitNoKeys(t, none, "a deleted job's")
}

// waitExpired waits until Redis has expired every key of keys, failing
// after 10 s.
func waitExpired(t *testing.T, s *Store, keys ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for _, key := range keys {
		for ok(s.c.Do(ctx, s.c.B().Exists().Key(key).Build()).AsInt64())(t) != 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("%s still there after 10 s", key)
			case <-time.After(10 * time.Millisecond):
			}
		}
	}
}

// allBuckets is every timer bucket of s's deployment.
func allBuckets(s *Store) []int {
	out := make([]int, s.opt.Buckets)
	for i := range out {
		out[i] = i
	}
	return out
}

// waitNoKeys waits until s's prefix holds no key but its deployment's
// own (meta, seq counter, topic registry, bucket leases and due
// indexes, instances), failing after 10 s.
func waitNoKeys(t *testing.T, s *Store, what string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		var left []string
		for _, key := range ok(s.c.Do(ctx, s.c.B().Keys().Pattern(s.opt.Prefix+":*").Build()).AsStrSlice())(t) {
			switch {
			case key == s.k.meta(), key == s.k.seqCounter(), key == s.k.topics(), key == s.k.instances(),
				key == s.k.instance(s.opt.InstanceID), strings.Contains(key, "}:lease"), strings.Contains(key, "}:due"),
				key == s.k.topic("t")[8]:
				continue
			}
			left = append(left, key)
		}
		if len(left) == 0 {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s keys still there after 10 s: %v", what, left)
		case <-time.After(10 * time.Millisecond):
		}
	}
}
