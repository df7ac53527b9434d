package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// FuzzFreshSeq checks the decoder of the ids the server makes: it never
// panics, an id it decodes is exactly the id freshID makes of it (one
// id per job: no other spelling of a UUID decodes), and freshID's ids
// decode to their seq with the timestamp of the id they were made from.
func FuzzFreshSeq(f *testing.F) {
	v7 := uuid.Must(uuid.NewV7()).String()
	for _, seed := range []string{
		"", "x", v7, freshID(v7, 1), freshID(v7, 1_785_000_000_000_000), freshID(v7, freshSeqMax),
		"0190f0c2-4c7a-7d1a-8000-000000000000",              // the marker, seq 0
		"0190F0C2-4C7A-7D1A-8006-5A8F1B2C3D4E",              // upper case
		"0190f0c2-4c7a-7d1a-c006-5a8f1b2c3d4e",              // another variant
		"0190f0c2-4c7a-4d1a-8006-5a8f1b2c3d4e",              // version 4
		"0190f0c2-4c7a-7d1a-8006-5a8f1b2c3d4g",              // not hex
		"0190f0c24c7a-7d1a-8006-5a8f1b2c3d4e0",              // a dash moved
		"{0190f0c2-4c7a-7d1a-8006-5a8f1b2c3d4e}",            // braces
		"urn:uuid:0190f0c2-4c7a-7d1a-8006-5a8f1b2c3d4e",     // a URN
		"0190f0c2-4c7a-7d1a-8006-5a8f1b2c3d4e\x00",          // one byte more
		"0190f0c2-4c7a-7d1a-8006-5a8f1b2c3d4\xff",           // not UTF-8
		"0190f0c2+4c7a+7d1a+8006+5a8f1b2c3d4e",              // other separators
		"ffffffff-ffff-7d1a-bfff-ffffffffffff",              // every bit it may have
		"00000000-0000-7d1a-8000-000000000001",              // the least
		"0190f0c2-4c7a-7d1a-8006-5a8f1b2c3d4e-0190f0c2-4c7", // too long
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, id string) {
		seq, ok := freshSeq(id)
		if !ok {
			if seq != 0 {
				t.Fatalf("freshSeq(%q) = %d, false; want 0 when it does not decode", id, seq)
			}
			return
		}
		if seq == 0 || seq > freshSeqMax {
			t.Fatalf("freshSeq(%q) = %d, out of 1..2^62-1", id, seq)
		}
		if again := freshID(id, seq); again != id {
			t.Fatalf("freshSeq(%q) = %d, but freshID of it is %q", id, seq, again)
		}
		// Any seq makes an id that decodes to it, with id's time.
		other := seq ^ 0x2a5
		if other == 0 {
			other = 1
		}
		made := freshID(id, other)
		ms, _ := uuidV7Millis(id)
		if got, ok := freshSeq(made); !ok || got != other {
			t.Fatalf("freshSeq(freshID(%q, %d)) = %d, %v", id, other, got, ok)
		}
		if got, ok := uuidV7Millis(made); !ok || got != ms {
			t.Fatalf("freshID(%q, %d) = %q: timestamp %d, want %d", id, other, made, got, ms)
		}
		if _, err := uuid.Parse(made); err != nil {
			t.Fatalf("freshID(%q, %d) = %q, not a UUID: %v", id, other, made, err)
		}
	})
}

// TestFreshIDKeepsTheEnginesTime: an id PutFresh makes is a UUIDv7 of
// the engine's millisecond, with the marker and the seq, which uuid
// reads as version 7 of the RFC 4122 variant.
func TestFreshIDKeepsTheEnginesTime(t *testing.T) {
	engine := uuid.Must(uuid.NewV7())
	id := freshID(engine.String(), 1_785_123_456_789_012)
	u, err := uuid.Parse(id)
	if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		t.Fatalf("freshID = %q (%v): version %d, variant %v; want a UUIDv7", id, err, u.Version(), u.Variant())
	}
	if sec, nsec := u.Time().UnixTime(); sec*1000+nsec/1e6 != func() int64 { s, n := engine.Time().UnixTime(); return s*1000 + n/1e6 }() {
		t.Errorf("freshID's time %d s %d ns, want the engine id's millisecond", sec, nsec)
	}
	if seq, ok := freshSeq(id); !ok || seq != 1_785_123_456_789_012 {
		t.Errorf("freshSeq(%q) = %d, %v; want the seq", id, seq, ok)
	}
}

// keysLike counts the keys matching pattern on every node of s's Redis.
func keysLike(t *testing.T, s *Store, pattern string) int {
	t.Helper()
	n := 0
	for _, c := range s.c.Nodes() {
		var cursor uint64
		for {
			e, err := c.Do(t.Context(), c.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			n += len(e.Elements)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return n
}

// TestFreshIDsNeedNoClaim: an id the server made carries its seq, so a
// fresh put writes no id claim (on one node and on a Cluster), and the
// job is still found by id through another instance, finished and
// deleted by id, and found by id once it ended, for the retention; its
// id put again is refused while it is live or retained, and free after.
// On a Cluster the retained job needs no P:{t}:r:<id> either. Before,
// every fresh put wrote a claim P:id:{<id>}.
func TestFreshIDsNeedNoClaim(t *testing.T) {
	for _, env := range []string{"DELAYQ_TEST_REDIS", "DELAYQ_TEST_REDIS_CLUSTER"} {
		t.Run(env, func(t *testing.T) { testFreshIDsNeedNoClaim(t, env) })
	}
}

func testFreshIDsNeedNoClaim(t *testing.T, env string) {
	clk := &fakeClock{now: hbase}
	ss := retainingOn(t, env, 2, store.Retention{For: time.Hour, Now: clk.Now})
	a, b := ss[0], ss[1]
	ctx := t.Context()
	engine := uuid.Must(uuid.NewV7()).String()
	done, live := hjob(engine, "ta"), hjob(uuid.Must(uuid.NewV7()).String(), "ta")
	if err := a.PutFresh(ctx, []*delayq.Job{done}); err != nil {
		t.Fatal(err)
	}
	if err := a.PutFresh(ctx, []*delayq.Job{live}); err != nil {
		t.Fatal(err)
	}
	if seq, ok := freshSeq(done.ID); !ok || seq != done.Seq || done.ID == engine {
		t.Fatalf("PutFresh gave the job id %s (seq %d), want one that carries its seq %d", done.ID, seq, done.Seq)
	}
	if ms, _ := uuidV7Millis(done.ID); ms != func() uint64 { m, _ := uuidV7Millis(engine); return m }() {
		t.Errorf("PutFresh's id %s does not keep the engine id %s's time", done.ID, engine)
	}
	claims := a.k.prefix + ":id:*"
	if n := keysLike(t, a, claims); n != 0 {
		t.Fatalf("%d id claims after two fresh puts, want none", n)
	}
	// b has not seen the seqs: it finds them through the seq's shard.
	if got := ok(b.Get(ctx, delayq.Ref{ID: done.ID}))(t); got.Seq != done.Seq || got.ID != done.ID {
		t.Fatalf("Get by id on another instance = %+v", got)
	}
	r := ok(b.Reserve(ctx, store.ReserveParams{Topics: []string{"ta"}, Max: 1, Now: hat(1), By: "w"}))(t)[0]
	if r.ID != done.ID {
		t.Fatalf("Reserve = %s, want %s", r.ID, done.ID)
	}
	ok(b.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: done.ID, Reservation: r.Reservation}, Now: hat(2)}))(t)
	if n := keysLike(t, a, claims); n != 0 {
		t.Fatalf("%d id claims after a retained finish, want none", n)
	}
	if n := keysLike(t, a, a.k.prefix+":{ta}:r:*"); n != 0 {
		t.Errorf("%d retained id keys (P:{t}:r:<id>), want none: the id carries the seq", n)
	}
	third := openStore(t, redisAddrs(t, env), Options{Prefix: a.k.prefix, Retention: store.Retention{For: time.Hour, Now: clk.Now}})
	defer third.Close()
	for _, s := range []*Store{a, b, third} { // third has seen neither seq
		if got, err := s.Get(ctx, delayq.Ref{ID: done.ID}); err != nil || got.State != delayq.StateFinished || got.Seq != done.Seq {
			t.Fatalf("Get of the finished job by id = %+v, %v; want it, finished", got, err)
		}
	}
	// Its id put again, by a producer: refused, live or retained.
	for _, c := range []struct {
		j     *delayq.Job
		state delayq.State
	}{{done, delayq.StateFinished}, {live, delayq.StateReady}} {
		for _, topic := range []string{"ta", "tb"} {
			for _, s := range []*Store{a, third} {
				err := s.Put(ctx, []*delayq.Job{hjob(c.j.ID, topic)})
				var ex *delayq.ExistsError
				if !errors.As(err, &ex) || ex.ID != c.j.ID || ex.State != c.state {
					t.Fatalf("Put of the %s job's id into %s = %v, want *ExistsError{%s, %s}", c.state, topic, err, c.j.ID, c.state)
				}
			}
		}
	}
	// A group of puts on one node checks them too: one put of a new id
	// in the same group is stored.
	if err := third.Put(ctx, []*delayq.Job{hjob(live.ID, "ta"), hjob("other", "ta")}); !errors.Is(err, delayq.ErrExists) {
		t.Fatalf("Put of a batch with the live job's id = %v, want ErrExists", err)
	}
	if _, err := a.Get(ctx, delayq.Ref{ID: "other"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get(other) after its batch was refused = %v, want ErrNotFound", err)
	}
	// Deleted by id through an instance that never saw it.
	if got := ok(third.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: live.ID}, Force: true, Now: hat(3)}))(t); got.ID != live.ID {
		t.Fatalf("Delete by id = %+v", got)
	}
	if n := keysLike(t, a, claims); n != 0 {
		t.Fatalf("%d id claims after the fresh jobs ended, want none", n)
	}
	// Once the window is over the id is free: a producer's put of it is
	// claimed and found as any other.
	clk.Set(hat(3).Add(time.Hour))
	if _, err := b.Get(ctx, delayq.Ref{ID: done.ID}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get once the retention ended = %v, want ErrNotFound", err)
	}
	again := hjob(done.ID, "tb")
	if err := b.Put(ctx, []*delayq.Job{again}); err != nil {
		t.Fatalf("Put of the id once its retention ended = %v", err)
	}
	if got := ok(third.Get(ctx, delayq.Ref{ID: done.ID}))(t); got.Topic != "tb" || got.State != delayq.StateReady || got.Seq != again.Seq {
		t.Fatalf("Get after the put = %+v, want the new job in tb", got)
	}
	ok(third.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: done.ID}, Force: true, Now: hat(3).Add(time.Hour)}))(t)
}

// TestProducerIDThatCarriesASeq: a producer's own UUIDv7 that has the
// marker (1 in 4096 do) and so seems to carry the seq of another job is
// claimed and found, finished and retained through its claim as any
// producer's id, and the other job is left alone; one whose seq names
// no job likewise.
func TestProducerIDThatCarriesASeq(t *testing.T) {
	for _, env := range []string{"DELAYQ_TEST_REDIS", "DELAYQ_TEST_REDIS_CLUSTER"} {
		t.Run(env, func(t *testing.T) {
			clk := &fakeClock{now: hbase}
			s := retainingOn(t, env, 1, store.Retention{For: time.Hour, Now: clk.Now})[0]
			ctx := t.Context()
			victim := hjob(uuid.Must(uuid.NewV7()).String(), "tv")
			if err := s.PutFresh(ctx, []*delayq.Job{victim}); err != nil {
				t.Fatal(err)
			}
			for _, seq := range []uint64{victim.Seq, victim.Seq + 1<<40} {
				// a UUIDv7 of a second before: the same seq and time would
				// make the victim's own id
				id := freshID(v7At(time.Now().Add(-time.Second)), seq)
				mine := hjob(id, "tp")
				if err := s.Put(ctx, []*delayq.Job{mine}); err != nil {
					t.Fatalf("Put of a producer's id that carries seq %d = %v", seq, err)
				}
				if n := keysLike(t, s, s.k.claim(id)); n != 1 {
					t.Fatalf("the producer's id has %d claims, want 1", n)
				}
				if got := ok(s.Get(ctx, delayq.Ref{ID: id}))(t); got.Seq != mine.Seq || got.Topic != "tp" {
					t.Fatalf("Get(%s) = %+v, want the producer's job", id, got)
				}
				r := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"tp"}, Max: 1, Now: hat(1), By: "w"}))(t)[0]
				ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id, Reservation: r.Reservation}, Now: hat(2)}))(t)
				if got := ok(s.Get(ctx, delayq.Ref{ID: id}))(t); got.State != delayq.StateFinished || got.Seq != mine.Seq {
					t.Fatalf("Get(%s) once finished = %+v, want the finished producer's job", id, got)
				}
				if err := s.Put(ctx, []*delayq.Job{hjob(id, "tp")}); !errors.Is(err, delayq.ErrExists) {
					t.Fatalf("Put of the retained producer's id = %v, want ErrExists", err)
				}
			}
			if got := ok(s.Get(ctx, delayq.Ref{ID: victim.ID}))(t); got.State != delayq.StateReady {
				t.Fatalf("the job whose seq the producer's id carried is %s, want ready", got.State)
			}
		})
	}
}

// TestOldClaimOfAServerMadeID: a job an earlier build put with an id
// it made (a claim naming the seq, the record with its claim: the
// server's ids then carried no seq) is found by id through its claim,
// finished, found once retained, and its id refused while retained; and
// one whose id has the marker by chance likewise. No build before wrote
// what this one reads differently, so this passes on the old code too:
// it keeps the fallback to the claim honest.
func TestOldClaimOfAServerMadeID(t *testing.T) {
	for _, env := range []string{"DELAYQ_TEST_REDIS", "DELAYQ_TEST_REDIS_CLUSTER"} {
		t.Run(env, func(t *testing.T) {
			clk := &fakeClock{now: hbase}
			s := retainingOn(t, env, 1, store.Retention{For: time.Hour, Now: clk.Now})[0]
			ctx := t.Context()
			for _, id := range []string{uuid.Must(uuid.NewV7()).String(), freshID(uuid.Must(uuid.NewV7()).String(), 1<<45)} {
				j := hjob(id, "to")
				oldFreshPut(t, s, j)
				other := openStore(t, redisAddrs(t, env), Options{Prefix: s.k.prefix, Retention: store.Retention{For: time.Hour, Now: clk.Now}})
				if got := ok(other.Get(ctx, delayq.Ref{ID: id}))(t); got.Seq != j.Seq {
					t.Fatalf("Get(%s) = seq %d, want %d", id, got.Seq, j.Seq)
				}
				r := ok(other.Reserve(ctx, store.ReserveParams{Topics: []string{"to"}, Max: 1, Now: hat(1), By: "w"}))(t)[0]
				ok(other.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id, Reservation: r.Reservation}, Now: hat(2)}))(t)
				if got := ok(other.Get(ctx, delayq.Ref{ID: id}))(t); got.State != delayq.StateFinished {
					t.Fatalf("Get(%s) once finished = %s, want finished", id, got.State)
				}
				if err := other.Put(ctx, []*delayq.Job{hjob(id, "to")}); !errors.Is(err, delayq.ErrExists) {
					t.Fatalf("Put of the retained id = %v, want ErrExists", err)
				}
				other.Close()
			}
		})
	}
}

// oldFreshPut puts j as an earlier build's PutFresh did: a claim that
// names the seq, the record with that claim, no entry in the topic's id
// index.
func oldFreshPut(t *testing.T, s *Store, j *delayq.Job) {
	t.Helper()
	ctx := context.WithoutCancel(t.Context())
	seq, err := s.takeSeqs(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	j.Seq = seq
	claims := []string{j.Topic + "|" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + nonce() + "|" + strconv.FormatUint(seq, 10)}
	jobs := []*delayq.Job{j}
	if err := s.c.Do(ctx, s.c.B().Set().Key(s.k.claim(j.ID)).Value(claims[0]).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if err := s.indexPut(ctx, jobs); err != nil {
		t.Fatal(err)
	}
	if errs, _, err := s.insertParts(ctx, j.Topic, []insertPart{{jobs: jobs, claims: claims, fresh: true}}); err != nil || errs[0] != nil {
		t.Fatalf("insert: %v, %v", err, errs)
	}
}

// v7At is a UUIDv7 of the millisecond of at.
func v7At(at time.Time) string {
	ms := at.UnixMilli()
	return fmt.Sprintf("%08x-%04x-7000-8000-000000000000", ms>>16, ms&0xffff)
}
