package storetest

import (
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// buryAt puts a ready job id in topic, reserves it at now and buries it at
// now, returning the buried job.
func (h *harness) buryAt(id, topic string, now time.Time) *delayq.Job {
	h.t.Helper()
	j := newJob(id, topic, now, now)
	h.put(j)
	r := h.reserve(now, 1, topic)
	if len(r) != 1 || r[0].ID != id {
		h.t.Fatalf("Reserve(%s) = %v, want only %s (does the topic hold other ready jobs?)", topic, show(r), id)
	}
	b, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(r[0]), Now: now})
	if err != nil {
		h.t.Fatalf("Bury(%s) = %v", id, err)
	}
	return b
}

// kicked returns want (a clone of j) after a kick at now.
func kicked(j *delayq.Job, now time.Time) *delayq.Job {
	w := j.Clone()
	w.State, w.Due = delayq.StateReady, now
	w.Kicks++
	return w
}

func (h *harness) kick(topic string, limit int, now time.Time) int {
	h.t.Helper()
	return h.kickState(topic, limit, "", now)
}

// kickState kicks with p.State = state.
func (h *harness) kickState(topic string, limit int, state delayq.State, now time.Time) int {
	h.t.Helper()
	n, err := h.s.Kick(h.ctx, store.KickParams{Topic: topic, Max: limit, State: state, Now: now})
	if err != nil {
		h.t.Fatalf("Kick(%s, %d, %q) = %v", topic, limit, state, err)
	}
	return n
}

func testKick(t *testing.T, f Factory) {
	t.Run("BuriedFirstOldestFirst", func(t *testing.T) {
		h := open(t, f)
		h.put(delayed("d", "t", 100))
		b2 := h.buryAt("b2", "t", at(20))
		b1 := h.buryAt("b1", "t", at(10))
		b3 := h.buryAt("b3", "t", at(30))
		other := h.buryAt("o", "other", at(0))
		now := at(50)
		check(t, "Kick(t, 2)", h.kick("t", 2, now), 2)
		check(t, "Get(b1)", h.get(delayq.Ref{ID: "b1"}), kicked(b1, now))
		check(t, "Get(b2)", h.get(delayq.Ref{ID: "b2"}), kicked(b2, now))
		check(t, "Get(b3)", h.get(delayq.Ref{ID: "b3"}), b3)
		check(t, "Kick(t, 5) with one buried and one delayed", h.kick("t", 5, now), 1)
		check(t, "Get(b3)", h.get(delayq.Ref{ID: "b3"}), kicked(b3, now))
		check(t, "Get(o) of another topic", h.get(delayq.Ref{ID: "o"}), other)
		if got := h.get(delayq.Ref{ID: "d"}); got.State != delayq.StateDelayed {
			t.Errorf("Get(d).State = %s after kicks of buried jobs, want delayed", got.State)
		}
	})
	t.Run("DelayedByDueWhenNoneBuried", func(t *testing.T) {
		h := open(t, f)
		d3, d1, d2 := delayed("d3", "t", 3000), delayed("d1", "t", 1000), delayed("d2", "t", 2000)
		h.put(d3, d1, d2, ready("r", "t"))
		now := at(500)
		check(t, "Kick(t, 2)", h.kick("t", 2, now), 2)
		check(t, "Get(d1)", h.get(delayq.Ref{ID: "d1"}), kicked(d1, now))
		check(t, "Get(d2)", h.get(delayq.Ref{ID: "d2"}), kicked(d2, now))
		check(t, "Get(d3)", h.get(delayq.Ref{ID: "d3"}), d3)
		check(t, "Tick() after kicks", h.tick(now, 0), &store.TickResult{Next: at(3000)})
		check(t, "Kick(t, 10)", h.kick("t", 10, now), 1)
		check(t, "Kick(t, 10) with nothing to kick", h.kick("t", 10, now), 0)
		check(t, "Kick(unknown, 10)", h.kick("unknown", 10, now), 0)
	})
	// An operator's "retry what failed" must never fire a job due later,
	// and firing delayed jobs early must never revive buried ones.
	t.Run("BuriedOnly", func(t *testing.T) {
		h := open(t, f)
		d := delayed("d", "t", 100)
		h.put(d)
		now := at(50)
		check(t, "Kick(t, 10, buried) with only a delayed job", h.kickState("t", 10, delayq.StateBuried, now), 0)
		check(t, "Get(d)", h.get(delayq.Ref{ID: "d"}), d)
		b1 := h.buryAt("b1", "t", at(10))
		b2 := h.buryAt("b2", "t", at(20))
		check(t, "Kick(t, 1, buried)", h.kickState("t", 1, delayq.StateBuried, now), 1)
		check(t, "Get(b1)", h.get(delayq.Ref{ID: "b1"}), kicked(b1, now))
		check(t, "Kick(t, 10, buried)", h.kickState("t", 10, delayq.StateBuried, now), 1)
		check(t, "Get(b2)", h.get(delayq.Ref{ID: "b2"}), kicked(b2, now))
		check(t, "Get(d)", h.get(delayq.Ref{ID: "d"}), d)
	})
	t.Run("DelayedOnly", func(t *testing.T) {
		h := open(t, f)
		b := h.buryAt("b", "t", at(10))
		d2, d1 := delayed("d2", "t", 2000), delayed("d1", "t", 1000)
		h.put(d2, d1)
		now := at(50)
		check(t, "Kick(t, 1, delayed) with a buried job", h.kickState("t", 1, delayq.StateDelayed, now), 1)
		check(t, "Get(d1)", h.get(delayq.Ref{ID: "d1"}), kicked(d1, now))
		check(t, "Get(d2)", h.get(delayq.Ref{ID: "d2"}), d2)
		check(t, "Get(b)", h.get(delayq.Ref{ID: "b"}), b)
		check(t, "Kick(t, 10, delayed)", h.kickState("t", 10, delayq.StateDelayed, now), 1)
		check(t, "Kick(t, 10, delayed) with none delayed", h.kickState("t", 10, delayq.StateDelayed, now), 0)
		check(t, "Get(b)", h.get(delayq.Ref{ID: "b"}), b)
		check(t, "Kick(t, 10, ready)", h.kickState("t", 10, delayq.StateReady, now), 0)
		check(t, "Get(b)", h.get(delayq.Ref{ID: "b"}), b)
	})
}

func testKickJob(t *testing.T, f Factory) {
	t.Run("BuriedAndDelayed", func(t *testing.T) {
		h := open(t, f)
		b := h.buryAt("b", "t", at(10))
		d := delayed("d", "t", 9000)
		h.put(d)
		now := at(100)
		for _, j := range []*delayq.Job{b, d} {
			got, err := h.s.KickJob(h.ctx, store.KickJobParams{Ref: delayq.Ref{Seq: j.Seq}, Now: now})
			checkErr(t, "KickJob("+j.ID+")", err, nil)
			check(t, "KickJob("+j.ID+")", got, kicked(j, now))
			check(t, "Get("+j.ID+")", h.get(delayq.Ref{ID: j.ID}), kicked(j, now))
		}
		check(t, "Tick() after KickJob", h.tick(at(10_000), 0), &store.TickResult{})
	})
	t.Run("ReadyOrReservedIsErrState", func(t *testing.T) {
		h := open(t, f)
		r := ready("r", "t")
		h.put(r)
		res := h.putReserved("res", base, nil)
		for _, want := range []*delayq.Job{r, res} {
			_, err := h.s.KickJob(h.ctx, store.KickJobParams{Ref: delayq.Ref{ID: want.ID}, Now: base})
			checkErr(t, "KickJob("+want.ID+")", err, delayq.ErrState)
			check(t, "Get("+want.ID+") after refused KickJob", h.get(delayq.Ref{ID: want.ID}), want)
		}
		_, err := h.s.KickJob(h.ctx, store.KickJobParams{Ref: delayq.Ref{ID: "nope"}, Now: base})
		checkErr(t, "KickJob(nope)", err, delayq.ErrNotFound)
	})
}

func testUpdate(t *testing.T, f Factory) {
	now := at(1000)
	type tc struct {
		name  string
		setup func(h *harness) *delayq.Job
		p     store.UpdateParams
		edit  func(w *delayq.Job) // from the job as it was
	}
	putReady := func(h *harness) *delayq.Job { j := ready("a", "t"); h.put(j); return j }
	putDelayed := func(h *harness) *delayq.Job { j := delayed("a", "t", 5000); h.put(j); return j }
	putBuried := func(h *harness) *delayq.Job { return h.buryAt("a", "t", at(10)) }
	due := func(ms int64) *time.Time { d := at(ms); return &d }
	cases := []tc{
		{"ReadyToDelayed", putReady, store.UpdateParams{Due: due(3000), Delay: 2 * time.Second},
			func(w *delayq.Job) { w.State, w.Due, w.Delay = delayq.StateDelayed, at(3000), 2*time.Second }},
		{"DelayedToReady", putDelayed, store.UpdateParams{Due: due(1000)},
			func(w *delayq.Job) { w.State, w.Due, w.Delay = delayq.StateReady, at(1000), 0 }},
		{"DelayedMoves", putDelayed, store.UpdateParams{Due: due(7000), Delay: 6 * time.Second},
			func(w *delayq.Job) { w.Due, w.Delay = at(7000), 6*time.Second }},
		{"BuriedToDelayed", putBuried, store.UpdateParams{Due: due(3000), Delay: 2 * time.Second},
			func(w *delayq.Job) { w.State, w.Due, w.Delay = delayq.StateDelayed, at(3000), 2*time.Second }},
		{"BuriedToReady", putBuried, store.UpdateParams{Due: due(900)},
			func(w *delayq.Job) { w.State, w.Due, w.Delay = delayq.StateReady, at(900), 0 }},
		{"Body", putDelayed, store.UpdateParams{Body: []byte{0, 0xfe, 'x'}},
			func(w *delayq.Job) { w.Body = []byte{0, 0xfe, 'x'} }},
		{"EmptyBody", putReady, store.UpdateParams{Body: []byte{}},
			func(w *delayq.Job) { w.Body = nil }},
		{"Priority", putBuried, store.UpdateParams{Priority: u32(0)},
			func(w *delayq.Job) { w.Priority = 0 }},
		{"NilKeepsAll", putDelayed, store.UpdateParams{}, func(*delayq.Job) {}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := open(t, f)
			j := c.setup(h)
			c.p.Ref, c.p.Now = delayq.Ref{ID: "a"}, now
			got, err := h.s.Update(h.ctx, c.p)
			checkErr(t, "Update()", err, nil)
			want := j.Clone()
			c.edit(want)
			check(t, "Update()", got, want)
			check(t, "Get(a) after Update", h.get(delayq.Ref{ID: "a"}), want)
		})
	}
	t.Run("ReservedIsErrNotReserved", func(t *testing.T) {
		h := open(t, f)
		j := h.putReserved("a", base, nil)
		_, err := h.s.Update(h.ctx, store.UpdateParams{Ref: held(j), Priority: u32(1), Now: now})
		checkErr(t, "Update(reserved a)", err, delayq.ErrNotReserved)
		check(t, "Get(a) after refused Update", h.get(delayq.Ref{ID: "a"}), j)
		_, err = h.s.Update(h.ctx, store.UpdateParams{Ref: delayq.Ref{ID: "nope"}, Priority: u32(1), Now: now})
		checkErr(t, "Update(nope)", err, delayq.ErrNotFound)
	})
	t.Run("NewDueTicks", func(t *testing.T) {
		h := open(t, f)
		putDelayed(h)
		if _, err := h.s.Update(h.ctx, store.UpdateParams{Ref: delayq.Ref{ID: "a"}, Due: due(2000), Now: now}); err != nil {
			t.Fatal(err)
		}
		check(t, "Tick() after Update", h.tick(now, 0), &store.TickResult{Next: at(2000)})
		check(t, "Tick(new due)", h.tick(at(2000), 0), &store.TickResult{Ready: map[string]int{"t": 1}, Lateness: []time.Duration{0},
			LatenessByTopic: map[string][]time.Duration{"t": {0}}})
	})
}

// testReserveJob checks Store.ReserveJob (beanstalkd reserve-job).
func testReserveJob(t *testing.T, f Factory) {
	h := open(t, f)
	r, d := ready("r", "t"), delayed("d", "t", 5000)
	h.put(r, d)
	b := h.buryAt("b", "p", at(10))
	h.pause("t", at(60_000))
	now := at(100)
	for _, j := range []*delayq.Job{r, d, b} {
		got, err := h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: delayq.Ref{Seq: j.Seq}, Now: now})
		checkErr(t, "ReserveJob("+j.ID+")", err, nil)
		check(t, "ReserveJob("+j.ID+")", got, reservedAs(j, now))
		check(t, "Get("+j.ID+")", h.get(delayq.Ref{ID: j.ID}), reservedAs(j, now))
	}
	_, err := h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "r"}, Now: now})
	checkErr(t, "ReserveJob(r) of a reserved job", err, delayq.ErrState)
	_, err = h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "nope"}, Now: now})
	checkErr(t, "ReserveJob(nope)", err, delayq.ErrNotFound)
	check(t, "Tick() with jobs reserved by ReserveJob", h.tick(now, 0), &store.TickResult{Next: at(10_100)})
}
