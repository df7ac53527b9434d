package storetest

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

func testPut(t *testing.T, f Factory) {
	t.Run("AssignsIncreasingSeq", func(t *testing.T) {
		h := open(t, f)
		a, b, c := ready("a", "t"), ready("b", "t"), delayed("c", "u", 5000)
		h.put(a, b)
		h.put(c)
		if a.Seq == 0 || !(a.Seq < b.Seq && b.Seq < c.Seq) {
			t.Errorf("Put seqs = %d, %d, %d, want non-zero and increasing", a.Seq, b.Seq, c.Seq)
		}
	})
	t.Run("StateAsGiven", func(t *testing.T) {
		h := open(t, f)
		r, d := ready("r", "t"), delayed("d", "t", 1)
		h.put(r, d)
		check(t, "Get(r)", h.get(delayq.Ref{ID: "r"}), r)
		check(t, "Get(d)", h.get(delayq.Ref{ID: "d"}), d)
	})
	t.Run("RoundTripsEveryField", func(t *testing.T) {
		h := open(t, f)
		bin := &delayq.Job{
			ID: "order:42_x-y.z", Topic: "t(1)+$;/", Body: []byte{0, 1, 0xff, '\r', '\n', 0xc3, 0x28, 0},
			Priority: math.MaxUint32, TTR: 2500 * time.Millisecond, MaxAttempts: 3,
			State: delayq.StateDelayed, Due: at(86_400_000_123), Created: at(-17), Delay: 86_400_000_140 * time.Millisecond,
		}
		empty := &delayq.Job{
			ID: "empty", Topic: "t", Body: []byte{}, Priority: 0, TTR: time.Second,
			State: delayq.StateReady, Due: at(-1), Created: at(-1),
		}
		big := ready("big", "t")
		big.Body = []byte(strings.Repeat("0123456789abcdef", 4096)) // 64 KiB
		h.put(bin, empty, big)
		for _, want := range []*delayq.Job{bin, empty, big} {
			check(t, "Get("+want.ID+")", h.get(delayq.Ref{ID: want.ID}), want)
			check(t, "Get(seq of "+want.ID+")", h.get(delayq.Ref{Seq: want.Seq}), want)
		}
	})
	t.Run("TruncatesToMillisecond", func(t *testing.T) {
		h := open(t, f)
		j := ready("j", "t")
		j.Due = base.Add(1500 * time.Microsecond)
		j.Created = base.Add(999 * time.Microsecond)
		j.TTR = 2*time.Second + 300*time.Microsecond
		h.put(j)
		want := j.Clone()
		want.Due, want.Created, want.TTR = at(1), base, 2*time.Second
		check(t, "Get(j)", h.get(delayq.Ref{ID: "j"}), want)
	})
	t.Run("ExistsForLiveID", func(t *testing.T) {
		h := open(t, f)
		live := ready("live-id", "t")
		h.put(live)
		err := h.s.Put(h.ctx, []*delayq.Job{ready("b", "t"), ready("live-id", "other")})
		checkErr(t, "Put(b, live-id) with live-id live", err, delayq.ErrExists)
		if err != nil && !strings.Contains(err.Error(), "live-id") {
			t.Errorf("Put(b, live-id) error %q does not name the id", err)
		}
		checkErr(t, "Get(b) after failed Put", getErr(h, "b"), delayq.ErrNotFound)
		check(t, "Get(live-id) after failed Put", h.get(delayq.Ref{ID: "live-id"}), live)
	})
	t.Run("ExistsInEveryState", func(t *testing.T) { testExistsInEveryState(t, f) })
	t.Run("ExistsForRepeatInBatch", func(t *testing.T) {
		h := open(t, f)
		err := h.s.Put(h.ctx, []*delayq.Job{ready("x", "t"), ready("dup-id", "t"), delayed("dup-id", "u", 10)})
		checkErr(t, "Put(x, dup-id, dup-id)", err, delayq.ErrExists)
		if err != nil && !strings.Contains(err.Error(), "dup-id") {
			t.Errorf("Put(x, dup-id, dup-id) error %q does not name the id", err)
		}
		for _, id := range []string{"x", "dup-id"} {
			checkErr(t, "Get("+id+") after failed Put", getErr(h, id), delayq.ErrNotFound)
		}
		check(t, "Topics() after failed Put", h.topics(), []delayq.TopicStats{})
	})
	t.Run("IDReusableAfterDelete", func(t *testing.T) {
		h := open(t, f)
		first := ready("a", "t")
		h.put(first)
		if _, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "a"}}); err != nil {
			t.Fatalf("Delete(a) = %v, want nil", err)
		}
		again := delayed("a", "u", 100)
		h.put(again)
		if again.Seq <= first.Seq {
			t.Errorf("Put(a) again: seq %d, want > %d (never reused)", again.Seq, first.Seq)
		}
		check(t, "Get(a)", h.get(delayq.Ref{ID: "a"}), again)
		checkErr(t, "Get(old seq)", seqErr(h, first.Seq), delayq.ErrNotFound)
	})
	t.Run("FreshLikePut", func(t *testing.T) {
		h := open(t, f)
		fp, ok := h.s.(store.FreshPutter)
		if !ok {
			t.Skip("the store has no PutFresh")
		}
		a := ready("a", "t")
		h.put(a)
		b, c := ready("b", "t"), delayed("c", "u", 5000)
		checkErr(t, "PutFresh(b, c)", fp.PutFresh(h.ctx, []*delayq.Job{b, c}), nil)
		if !(a.Seq < b.Seq && b.Seq < c.Seq) {
			t.Errorf("seqs a %d, b %d, c %d: want PutFresh to assign increasing seqs after Put's", a.Seq, b.Seq, c.Seq)
		}
		// A store may give the jobs ids of its own making (the
		// FreshPutter contract): they are read back from the jobs.
		if b.ID == "" || b.ID == c.ID || b.ID == a.ID || c.ID == a.ID {
			t.Errorf("ids after PutFresh: a %q, b %q, c %q; want three distinct ids", a.ID, b.ID, c.ID)
		}
		check(t, "Get(b)", h.get(delayq.Ref{ID: b.ID}), b)
		check(t, "Get(seq of c)", h.get(delayq.Ref{Seq: c.Seq}), c)
		if h.f.Reopen != nil {
			h.reopen()
			check(t, "Get(c) after reopen", h.get(delayq.Ref{ID: c.ID}), c)
		}
		checkErr(t, "Put(b) again", h.s.Put(h.ctx, []*delayq.Job{ready(b.ID, "t")}), delayq.ErrExists)
	})
	t.Run("EmptyBatch", func(t *testing.T) {
		h := open(t, f)
		checkErr(t, "Put()", h.s.Put(h.ctx, nil), nil)
		check(t, "Topics()", h.topics(), []delayq.TopicStats{})
	})
}

// testExistsInEveryState puts a job in each state and checks a second put
// of its id fails.
func testExistsInEveryState(t *testing.T, f Factory) {
	h := open(t, f)
	h.put(ready("ready", "t"), delayed("delayed", "t", 1000), ready("reserved", "r"), ready("buried", "b"))
	h.reserveOne(base, "r")
	j := h.reserveOne(base, "b")
	if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Now: base}); err != nil {
		t.Fatalf("Bury(%s) = %v", j.ID, err)
	}
	for _, id := range []string{"ready", "delayed", "reserved", "buried"} {
		err := h.s.Put(h.ctx, []*delayq.Job{ready(id, "t")})
		checkErr(t, "Put("+id+") of a live "+id+" job", err, delayq.ErrExists)
	}
}

func getErr(h *harness, id string) error {
	_, err := h.s.Get(h.ctx, delayq.Ref{ID: id})
	return err
}

func seqErr(h *harness, seq uint64) error {
	_, err := h.s.Get(h.ctx, delayq.Ref{Seq: seq})
	return err
}

func testGet(t *testing.T, f Factory) {
	t.Run("BySeqAndID", func(t *testing.T) {
		h := open(t, f)
		a, b := ready("a", "t"), delayed("b", "t", 10)
		h.put(a, b)
		check(t, "Get(#b)", h.get(delayq.Ref{Seq: b.Seq}), b)
		check(t, "Get(a)", h.get(delayq.Ref{ID: "a", Seq: b.Seq}), a) // ID wins over Seq
	})
	t.Run("ReturnsCopies", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t")
		h.put(a)
		want := a.Clone()
		a.Body[0] = 'X' // the caller's job is not the store's
		got := h.get(delayq.Ref{ID: "a"})
		got.Body[0] = 'Y'
		got.Priority = 1
		check(t, "Get(a)", h.get(delayq.Ref{ID: "a"}), want)
	})
	t.Run("NotFound", func(t *testing.T) {
		h := open(t, f)
		a := ready("a", "t")
		h.put(a, ready("gone", "t"))
		if _, err := h.s.Delete(h.ctx, store.DeleteParams{Ref: delayq.Ref{ID: "gone"}}); err != nil {
			t.Fatal(err)
		}
		for _, ref := range []delayq.Ref{{ID: "nope"}, {ID: "gone"}, {Seq: a.Seq + 1}, {Seq: a.Seq + 1000}, {}} {
			_, err := h.s.Get(h.ctx, ref)
			checkErr(t, "Get("+ref.String()+")", err, delayq.ErrNotFound)
		}
	})
}
