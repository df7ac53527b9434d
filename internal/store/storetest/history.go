package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// The history tests: every attempt recorded with who reserved it and how
// it ended, retained jobs (finished, deleted, failed) and the idempotency
// window their ids keep, and their expiry on a fake clock. They run only
// when Factory.OpenRetaining is set; the other groups ignore History and
// Ended (cmpOpts), so a store passes them before it records either.

// histOpts compares jobs with their History and Ended.
var histOpts = cmp.Options{cmpopts.EquateEmpty()}

// checkHist is check with History and Ended compared.
func checkHist(t *testing.T, call string, got, want any) {
	t.Helper()
	if diff := cmp.Diff(want, got, histOpts); diff != "" {
		t.Errorf("%s = %v, want %v\ndiff (-want +got):\n%s", call, show(got), show(want), diff)
	}
}

// fakeClock is the retention clock the tests move by hand.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// retainFor is the retention of most history tests.
const retainFor = time.Hour

// openRetaining returns a harness over a new store retaining for d (with
// bodies when bodies) on a fake clock at base, closed at cleanup.
func openRetaining(t *testing.T, f Factory, d time.Duration, bodies bool) (*harness, *fakeClock) {
	t.Helper()
	c := &fakeClock{now: base}
	h := &harness{t: t, f: f, ctx: t.Context()}
	h.s = f.OpenRetaining(t, store.Retention{For: d, Bodies: bodies, Now: c.Now})
	t.Cleanup(func() {
		if !h.closed {
			if err := h.s.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
		}
	})
	return h, c
}

// reserveBy reserves the one ready job of topic at now on behalf of by.
func (h *harness) reserveBy(now time.Time, topic, by string) *delayq.Job {
	h.t.Helper()
	jobs, err := h.s.Reserve(h.ctx, store.ReserveParams{Topics: []string{topic}, Max: 1, Now: now, By: by})
	if err != nil || len(jobs) != 1 {
		h.t.Fatalf("Reserve(%s, by %s, now %s) = %d jobs, %v; want 1 job", topic, by, now, len(jobs), err)
	}
	return jobs[0]
}

// del deletes as p says and fails the test on an error.
func (h *harness) del(p store.DeleteParams) *delayq.Job {
	h.t.Helper()
	j, err := h.s.Delete(h.ctx, p)
	if err != nil {
		h.t.Fatalf("Delete(%+v) = %v, want nil", p, err)
	}
	return j
}

// started is an attempt in progress.
func started(n int, reserved time.Time, by string) delayq.Attempt {
	return delayq.Attempt{N: n, Reserved: reserved, By: by}
}

// ended is an attempt that ended.
func ended(n int, reserved time.Time, by string, end time.Time, how delayq.Outcome, reason string) delayq.Attempt {
	return delayq.Attempt{N: n, Reserved: reserved, By: by, Ended: end, Outcome: how, Reason: reason}
}

// asRetained returns want (a clone of live j, as Get showed it before
// the delete) as the delete at now keeps it: in state, without
// reservation, its attempt in progress ended with how, and without body
// unless bodies.
func asRetained(j *delayq.Job, state delayq.State, now time.Time, how delayq.Outcome, bodies bool) *delayq.Job {
	w := j.Clone()
	w.State, w.Ended, w.Reservation, w.Deadline = state, now, "", time.Time{}
	if how != "" {
		w.EndAttempt(now, how, "")
	}
	if !bodies {
		w.Body = nil
	}
	return w
}

// existsState returns the State of the *delayq.ExistsError err holds, and
// reports a failure when err is not one naming id.
func existsState(t *testing.T, call string, err error, id string) delayq.State {
	t.Helper()
	var ee *delayq.ExistsError
	if !errors.As(err, &ee) {
		t.Errorf("%s = %v, want a *delayq.ExistsError", call, err)
		return ""
	}
	if ee.ID != id {
		t.Errorf("%s = ExistsError for %q, want for %q", call, ee.ID, id)
	}
	return ee.State
}

func testHistory(t *testing.T, f Factory) {
	if f.OpenRetaining == nil {
		t.Skip("Factory.OpenRetaining is nil: the store keeps no history yet")
	}
	groups := []struct {
		name string
		run  func(t *testing.T, f Factory)
	}{
		{"Attempts", testAttempts},
		{"Retained", testRetained},
		{"Window", testWindow},
		{"Expiry", testExpiry},
		{"Reopen", testRetainedReopen},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { g.run(t, f) })
	}
}

// testAttempts checks that every reserve starts an attempt and every way
// out of reserved ends it, with the outcome, reason and time the
// contract names.
func testAttempts(t *testing.T, f Factory) {
	t.Run("ReserveAndReserveJob", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"), delayed("b", "t", 60_000))
		r := h.reserveBy(at(10), "t", "alice")
		want := []delayq.Attempt{started(1, at(10), "alice")}
		checkHist(t, "Reserve(a).History", r.History, want)
		checkHist(t, "Get(a).History", h.get(delayq.Ref{ID: "a"}).History, want)
		tj, err := h.s.Touch(h.ctx, store.TouchParams{Ref: held(r), Now: at(20)})
		checkErr(t, "Touch(a)", err, nil)
		if err == nil {
			checkHist(t, "Touch(a).History", tj.History, want)
		}
		b, err := h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "b"}, Now: at(30), By: "beanstalk conn 7"})
		checkErr(t, "ReserveJob(b)", err, nil)
		if err == nil {
			checkHist(t, "ReserveJob(b).History", b.History, []delayq.Attempt{started(1, at(30), "beanstalk conn 7")})
		}
	})
	cases := []struct {
		name   string
		edit   func(*delayq.Job)
		end    func(h *harness, r *delayq.Job) // ends the attempt reserved at at(10)
		state  delayq.State
		latest delayq.Attempt
	}{
		{"Release", nil, func(h *harness, r *delayq.Job) {
			_, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(r), Due: at(20), Reason: "upstream 503", Now: at(20)})
			checkErr(h.t, "Release(a)", err, nil)
		}, delayq.StateReady, ended(1, at(10), "c1", at(20), delayq.OutcomeReleased, "upstream 503")},
		{"ReleaseBuries", func(j *delayq.Job) { j.MaxAttempts = 1 }, func(h *harness, r *delayq.Job) {
			_, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(r), Due: at(5000), Reason: "gave up", Now: at(20)})
			checkErr(h.t, "Release(a) of its last attempt", err, nil)
		}, delayq.StateBuried, ended(1, at(10), "c1", at(20), delayq.OutcomeBuried, "gave up")},
		{"Bury", nil, func(h *harness, r *delayq.Job) {
			_, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(r), Reason: "bad input", Now: at(20)})
			checkErr(h.t, "Bury(a)", err, nil)
		}, delayq.StateBuried, ended(1, at(10), "c1", at(20), delayq.OutcomeBuried, "bad input")},
		{"TTRExpiry", nil, func(h *harness, r *delayq.Job) {
			h.tick(r.Deadline.Add(500*time.Millisecond), 0)
		}, delayq.StateReady, ended(1, at(10), "c1", at(10_010), delayq.OutcomeTTRExpired, delayq.ReasonTTRExpired)},
		{"TTRExpiryBuries", func(j *delayq.Job) { j.MaxAttempts = 1 }, func(h *harness, r *delayq.Job) {
			h.tick(r.Deadline.Add(500*time.Millisecond), 0)
		}, delayq.StateBuried, ended(1, at(10), "c1", at(10_010), delayq.OutcomeBuried, delayq.ReasonTTRExpired)},
		{"TTRExpiryBacksOff", nil, func(h *harness, r *delayq.Job) {
			h.tickBackoff(r.Deadline.Add(500*time.Millisecond), map[string]store.Backoff{"t": {Initial: time.Minute, Max: time.Hour, Factor: 2}})
		}, delayq.StateDelayed, ended(1, at(10), "c1", at(10_010), delayq.OutcomeTTRExpired, delayq.ReasonTTRExpired)},
		{"GiveBack", nil, func(h *harness, r *delayq.Job) {
			h.giveBack(held(r))
		}, delayq.StateReady, ended(1, at(10), "c1", at(10), delayq.OutcomeGaveBack, "")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h, _ := openRetaining(t, f, retainFor, true)
			a := ready("a", "t")
			if tc.edit != nil {
				tc.edit(a)
			}
			h.put(a)
			r := h.reserveBy(at(10), "t", "c1")
			tc.end(h, r)
			got := h.get(delayq.Ref{ID: "a"})
			if got.State != tc.state {
				t.Fatalf("Get(a).State = %s, want %s", got.State, tc.state)
			}
			checkHist(t, "Get(a).History", got.History, []delayq.Attempt{tc.latest})
			if tc.state != delayq.StateReady {
				return
			}
			// The next attempt is appended after the ended one.
			n := tc.latest.N + 1
			if tc.latest.Outcome == delayq.OutcomeGaveBack {
				n = tc.latest.N // a give-back costs no attempt
			}
			r2 := h.reserveBy(at(20_000), "t", "c2")
			checkHist(t, "Reserve(a) again .History", r2.History, []delayq.Attempt{tc.latest, started(n, at(20_000), "c2")})
		})
	}
	t.Run("KickAndUpdateKeepIt", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"))
		r := h.reserveBy(at(10), "t", "c1")
		if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(r), Reason: "why", Now: at(20)}); err != nil {
			t.Fatalf("Bury(a) = %v", err)
		}
		want := []delayq.Attempt{ended(1, at(10), "c1", at(20), delayq.OutcomeBuried, "why")}
		k, err := h.s.KickJob(h.ctx, store.KickJobParams{Ref: delayq.Ref{ID: "a"}, Now: at(30)})
		checkErr(t, "KickJob(a)", err, nil)
		if err == nil {
			checkHist(t, "KickJob(a).History", k.History, want)
		}
		u, err := h.s.Update(h.ctx, store.UpdateParams{Ref: delayq.Ref{ID: "a"}, Priority: u32(3), Now: at(40)})
		checkErr(t, "Update(a)", err, nil)
		if err == nil {
			checkHist(t, "Update(a).History", u.History, want)
		}
	})
	t.Run("KeepsTheMostRecent", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"))
		const n = delayq.MaxHistory + 5
		var all []delayq.Attempt
		for i := 1; i <= n; i++ {
			t0 := at(int64(i) * 100)
			r := h.reserveBy(t0, "t", fmt.Sprintf("c%d", i))
			reason := fmt.Sprintf("try %d", i)
			if _, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(r), Due: t0.Add(10 * time.Millisecond), Reason: reason, Now: t0.Add(10 * time.Millisecond)}); err != nil {
				t.Fatalf("Release(a) #%d = %v", i, err)
			}
			all = append(all, ended(i, t0, fmt.Sprintf("c%d", i), t0.Add(10*time.Millisecond), delayq.OutcomeReleased, reason))
		}
		got := h.get(delayq.Ref{ID: "a"})
		if got.Attempts != n {
			t.Errorf("Get(a).Attempts = %d, want %d", got.Attempts, n)
		}
		checkHist(t, fmt.Sprintf("Get(a).History after %d attempts", n), got.History, all[n-delayq.MaxHistory:])
		r := h.reserveBy(at(100_000), "t", "last")
		want := append(append([]delayq.Attempt(nil), all[n-delayq.MaxHistory+1:]...), started(n+1, at(100_000), "last"))
		checkHist(t, fmt.Sprintf("Reserve(a) #%d .History", n+1), r.History, want)
		// The capped history is what a retained job keeps too.
		h.del(store.DeleteParams{Ref: held(r), Now: at(100_001)})
		want[len(want)-1] = ended(n+1, at(100_000), "last", at(100_001), delayq.OutcomeFinished, "")
		checkHist(t, "Get(a) finished .History", h.get(delayq.Ref{ID: "a"}).History, want)
	})
}

// testRetained checks what Delete and DeleteBatch keep, what reads show
// of it, and that nothing else sees it.
func testRetained(t *testing.T, f Factory) {
	for _, bodies := range []bool{true, false} {
		t.Run(fmt.Sprintf("EveryWayOut/bodies=%v", bodies), func(t *testing.T) {
			h, _ := openRetaining(t, f, retainFor, bodies)
			// One topic per job, so each reserve takes the job meant.
			h.put(ready("fin", "t-fin"), ready("rdy", "t-rdy"), delayed("dly", "t-dly", 60_000), ready("frc", "t-frc"), ready("bur", "t-bur"), ready("fbu", "t-fbu"))
			h.reserveBy(at(1), "t-fin", "c-fin")
			rdy := h.reserveBy(at(2), "t-rdy", "c-rdy") // released: ready again, with an ended attempt
			if _, err := h.s.Release(h.ctx, store.ReleaseParams{Ref: held(rdy), Due: at(3), Now: at(3)}); err != nil {
				t.Fatalf("Release(rdy) = %v", err)
			}
			h.reserveBy(at(4), "t-frc", "c-frc")
			bur := h.reserveBy(at(5), "t-bur", "c-bur")
			if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(bur), Reason: "poison", Now: at(6)}); err != nil {
				t.Fatalf("Bury(bur) = %v", err)
			}
			fbu := h.reserveBy(at(7), "t-fbu", "c-fbu")
			if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(fbu), Now: at(8)}); err != nil {
				t.Fatalf("Bury(fbu) = %v", err)
			}
			before := map[string]*delayq.Job{}
			for _, id := range []string{"fin", "rdy", "dly", "frc", "bur", "fbu"} {
				before[id] = h.get(delayq.Ref{ID: id})
			}
			cases := []struct {
				id    string
				p     store.DeleteParams
				state delayq.State
				how   delayq.Outcome
			}{
				{"fin", store.DeleteParams{Ref: held(before["fin"]), Now: at(100)}, delayq.StateFinished, delayq.OutcomeFinished},
				{"rdy", store.DeleteParams{Ref: delayq.Ref{ID: "rdy"}, Now: at(101)}, delayq.StateDeleted, ""},
				{"dly", store.DeleteParams{Ref: delayq.Ref{Seq: before["dly"].Seq}, Now: at(102)}, delayq.StateDeleted, ""},
				{"frc", store.DeleteParams{Ref: delayq.Ref{ID: "frc", Reservation: "bogus"}, Force: true, Now: at(103)}, delayq.StateDeleted, delayq.OutcomeDeleted},
				{"bur", store.DeleteParams{Ref: delayq.Ref{ID: "bur"}, Now: at(104)}, delayq.StateFailed, ""},
				{"fbu", store.DeleteParams{Ref: delayq.Ref{ID: "fbu"}, Force: true, Now: at(105)}, delayq.StateFailed, ""},
			}
			for _, tc := range cases {
				h.del(tc.p)
				want := asRetained(before[tc.id], tc.state, tc.p.Now, tc.how, bodies)
				checkHist(t, "Get("+tc.id+") after Delete", h.get(delayq.Ref{ID: tc.id}), want)
				checkHist(t, "Get(#seq of "+tc.id+") after Delete", h.get(delayq.Ref{Seq: want.Seq}), want)
				if !bodies && h.get(delayq.Ref{ID: tc.id}).Body != nil {
					t.Errorf("Get(%s).Body = %q, want nil (bodies not retained)", tc.id, h.get(delayq.Ref{ID: tc.id}).Body)
				}
			}
		})
	}
	t.Run("DeleteBatch", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"), ready("b", "t"))
		a := h.reserveBy(at(1), "t", "c1")
		b := h.get(delayq.Ref{ID: "b"})
		_, errs, err := h.s.DeleteBatch(h.ctx, []store.DeleteParams{
			{Ref: held(a), Now: at(10)},
			{Ref: delayq.Ref{ID: "b"}, Now: at(11)},
			{Ref: held(a), Now: at(12)},             // a again: retained, so absent
			{Ref: delayq.Ref{ID: "b"}, Now: at(13)}, // b again
		})
		checkErr(t, "DeleteBatch()", err, nil)
		for i, w := range []error{nil, nil, delayq.ErrNotFound, delayq.ErrNotFound} {
			if i < len(errs) {
				checkErr(t, fmt.Sprintf("DeleteBatch() entry %d", i), errs[i], w)
			}
		}
		checkHist(t, "Get(a) after DeleteBatch", h.get(delayq.Ref{ID: "a"}), asRetained(a, delayq.StateFinished, at(10), delayq.OutcomeFinished, true))
		checkHist(t, "Get(b) after DeleteBatch", h.get(delayq.Ref{ID: "b"}), asRetained(b, delayq.StateDeleted, at(11), "", true))
	})
	t.Run("NoTransition", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"))
		a := h.reserveBy(at(1), "t", "c1")
		h.del(store.DeleteParams{Ref: held(a), Now: at(2)})
		want := h.get(delayq.Ref{ID: "a"})
		for _, ref := range []delayq.Ref{held(a), {Seq: a.Seq, Reservation: a.Reservation}} {
			calls := []struct {
				name string
				err  error
			}{
				{"Release", second(h.s.Release(h.ctx, store.ReleaseParams{Ref: ref, Due: at(3), Now: at(3)}))},
				{"Touch", second(h.s.Touch(h.ctx, store.TouchParams{Ref: ref, Now: at(3)}))},
				{"Bury", second(h.s.Bury(h.ctx, store.BuryParams{Ref: ref, Now: at(3)}))},
				{"GiveBack", second(h.s.GiveBack(h.ctx, store.GiveBackParams{Ref: ref}))},
				{"Delete", second(h.s.Delete(h.ctx, store.DeleteParams{Ref: ref, Now: at(3)}))},
				{"Delete(force)", second(h.s.Delete(h.ctx, store.DeleteParams{Ref: ref, Force: true, Now: at(3)}))},
				{"Update", second(h.s.Update(h.ctx, store.UpdateParams{Ref: ref, Priority: u32(1), Now: at(3)}))},
				{"KickJob", second(h.s.KickJob(h.ctx, store.KickJobParams{Ref: ref, Now: at(3)}))},
				{"ReserveJob", second(h.s.ReserveJob(h.ctx, store.ReserveJobParams{Ref: ref, Now: at(3)}))},
			}
			for _, c := range calls {
				checkErr(t, fmt.Sprintf("%s(%s) of a retained job", c.name, ref), c.err, delayq.ErrNotFound)
			}
		}
		check(t, "Reserve(t) with only a retained job", h.reserve(at(4), 10, "t"), []*delayq.Job{})
		if n := h.kick("t", 10, at(4)); n != 0 {
			t.Errorf("Kick(t) with only a retained job = %d, want 0", n)
		}
		check(t, "Topics() with only a retained job", h.topics(), []delayq.TopicStats{})
		check(t, "Tick() with only a retained job and nothing expired", h.tick(at(5), 0).Ready, map[string]int{})
		checkHist(t, "Get(a) after the refused calls", h.get(delayq.Ref{ID: "a"}), want)
	})
	t.Run("NotCountedNorListedAsLive", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"), ready("b", "t"), delayed("c", "t", 5000))
		h.del(store.DeleteParams{Ref: delayq.Ref{ID: "a"}, Now: at(1)})
		ts := h.topics()
		if len(ts) != 1 || ts[0].Ready != 1 || ts[0].Delayed != 1 || ts[0].Reserved != 0 || ts[0].Buried != 0 {
			t.Errorf("Topics() with one retained, one ready, one delayed job = %+v, want t: 1 ready, 1 delayed", ts)
		}
		check(t, "List(t, all) with a retained job", ids(h.list("t", "", 0)), "b,c")
		check(t, "List(t, ready) with a retained job", ids(h.list("t", delayq.StateReady, 0)), "b")
	})
	t.Run("ListByState", func(t *testing.T) {
		h, _ := openRetaining(t, f, retainFor, true)
		h.put(ready("a", "t"), ready("b", "t"), ready("c", "t"), ready("d", "t"), ready("e", "t"), ready("x", "u"))
		jobs := h.reserve(at(1), 5, "t")
		ux := h.reserveBy(at(1), "u", "cu")
		byID := map[string]*delayq.Job{}
		for _, j := range jobs {
			byID[j.ID] = j
		}
		// Ended out of seq order, two at the same time (e deleted before
		// a): seq breaks the tie. Now never goes back.
		h.del(store.DeleteParams{Ref: held(ux), Now: at(5)})
		h.del(store.DeleteParams{Ref: held(byID["c"]), Now: at(10)})
		h.del(store.DeleteParams{Ref: delayq.Ref{ID: "d"}, Force: true, Now: at(15)})
		h.del(store.DeleteParams{Ref: held(byID["b"]), Now: at(20)})
		h.del(store.DeleteParams{Ref: held(byID["e"]), Now: at(30)})
		h.del(store.DeleteParams{Ref: held(byID["a"]), Now: at(30)})
		for _, limit := range []int{0, 1, 2, 3} {
			got := h.list("t", delayq.StateFinished, limit)
			check(t, fmt.Sprintf("List(t, finished, pages of %d)", limit), ids(got), "c,b,a,e")
			check(t, fmt.Sprintf("List(t, deleted, pages of %d)", limit), ids(h.list("t", delayq.StateDeleted, limit)), "d")
			check(t, fmt.Sprintf("List(t, failed, pages of %d)", limit), ids(h.list("t", delayq.StateFailed, limit)), "")
		}
		got := h.list("t", delayq.StateFinished, 0)
		if len(got) == 4 {
			checkHist(t, "List(t, finished)[0]", got[0], h.get(delayq.Ref{ID: "c"}))
		}
		check(t, "List(u, finished)", ids(h.list("u", delayq.StateFinished, 0)), "x")
		check(t, "List(t, all) of retained jobs only", h.list("t", "", 0), []*delayq.Job{})
	})
	t.Run("RetainNothing", func(t *testing.T) {
		h, _ := openRetaining(t, f, 0, true)
		first := ready("a", "t")
		h.put(first)
		r := h.reserveBy(at(1), "t", "c1")
		h.del(store.DeleteParams{Ref: held(r), Now: at(2)})
		checkErr(t, "Get(a) finished without retention", getErr(h, "a"), delayq.ErrNotFound)
		checkErr(t, "Get(#seq of a) finished without retention", seqErr(h, first.Seq), delayq.ErrNotFound)
		check(t, "List(t, finished) without retention", h.list("t", delayq.StateFinished, 0), []*delayq.Job{})
		h.put(ready("a", "t"))
		check(t, "Tick() without retention", h.tick(at(3), 0), &store.TickResult{})
	})
}

// second returns the error of a (value, error) pair.
func second[T any](_ T, err error) error { return err }

// testWindow checks the idempotency window: a put of a retained id fails
// as a put of a live id does, with the retained state, and stores
// nothing.
func testWindow(t *testing.T, f Factory) {
	h, _ := openRetaining(t, f, retainFor, false)
	h.put(ready("fin", "t"), ready("del", "t"), ready("bur", "t"), ready("live", "t"))
	fin := h.reserveBy(at(1), "t", "c")
	h.del(store.DeleteParams{Ref: held(fin), Now: at(2)})
	h.del(store.DeleteParams{Ref: delayq.Ref{ID: "del"}, Now: at(3)})
	bur := h.reserveBy(at(4), "t", "c")
	if _, err := h.s.Bury(h.ctx, store.BuryParams{Ref: held(bur), Now: at(5)}); err != nil {
		t.Fatalf("Bury(bur) = %v", err)
	}
	h.del(store.DeleteParams{Ref: delayq.Ref{ID: "bur"}, Now: at(6)})
	for id, state := range map[string]delayq.State{"fin": delayq.StateFinished, "del": delayq.StateDeleted, "bur": delayq.StateFailed} {
		err := h.s.Put(h.ctx, []*delayq.Job{ready("new", "t"), ready(id, "u")})
		call := fmt.Sprintf("Put(new, %s) with %s retained as %s", id, id, state)
		checkErr(t, call, err, delayq.ErrExists)
		if got := existsState(t, call, err, id); got != state {
			t.Errorf("%s: ExistsError.State = %q, want %q", call, got, state)
		}
		checkErr(t, "Get(new) after "+call, getErr(h, "new"), delayq.ErrNotFound)
		if got := h.get(delayq.Ref{ID: id}); got.State != state {
			t.Errorf("Get(%s) after %s: state %s, want %s", id, call, got.State, state)
		}
	}
	err := h.s.Put(h.ctx, []*delayq.Job{ready("live", "t")})
	call := "Put(live) with live ready"
	checkErr(t, call, err, delayq.ErrExists)
	if got := existsState(t, call, err, "live"); got != "" && got != delayq.StateReady {
		t.Errorf("%s: ExistsError.State = %q, want ready (or empty when the store does not know)", call, got)
	}
	check(t, "Topics() after the refused puts", len(h.topics()), 1)
}

// testExpiry checks that a retained job is readable, and its id taken,
// until Ended + Retention.For on the retention clock, and that Tick then
// removes it, a bounded number per call, earliest first.
func testExpiry(t *testing.T, f Factory) {
	t.Run("InvisibleWhenExpired", func(t *testing.T) {
		h, clock := openRetaining(t, f, retainFor, true)
		first := ready("a", "t")
		h.put(first)
		h.del(store.DeleteParams{Ref: delayq.Ref{ID: "a"}, Now: at(0)})
		end := at(0).Add(retainFor)
		clock.Set(end.Add(-time.Millisecond))
		if got := h.get(delayq.Ref{ID: "a"}); got.State != delayq.StateDeleted {
			t.Errorf("Get(a) 1ms before its retention ends: state %s, want deleted", got.State)
		}
		check(t, "List(t, deleted) 1ms before the end", ids(h.list("t", delayq.StateDeleted, 0)), "a")
		checkErr(t, "Put(a) 1ms before the end", h.s.Put(h.ctx, []*delayq.Job{ready("a", "t")}), delayq.ErrExists)
		clock.Set(end)
		checkErr(t, "Get(a) when its retention ends", getErr(h, "a"), delayq.ErrNotFound)
		checkErr(t, "Get(#seq of a) when its retention ends", seqErr(h, first.Seq), delayq.ErrNotFound)
		check(t, "List(t, deleted) when its retention ends", h.list("t", delayq.StateDeleted, 0), []*delayq.Job{})
		// Expired but maybe not removed yet: its id is free.
		again := delayed("a", "t", 3*3600_000)
		h.put(again)
		check(t, "Get(a) put again after the end", h.get(delayq.Ref{ID: "a"}), again)
		h.tick(end, 0)
		check(t, "Get(a) put again, after Tick", h.get(delayq.Ref{ID: "a"}), again)
		checkErr(t, "Get(#old seq) after Tick", seqErr(h, first.Seq), delayq.ErrNotFound)
	})
	t.Run("TickRemovesBounded", func(t *testing.T) {
		if f.ExpiresItself {
			t.Skip("the store removes expired retained jobs itself, not in Tick")
		}
		h, clock := openRetaining(t, f, retainFor, true)
		far := delayed("far", "t", 3*3600_000)
		h.put(far)
		var seqs []uint64
		for i := range 5 {
			j := ready(fmt.Sprintf("r%d", i), "t")
			h.put(j)
			seqs = append(seqs, j.Seq)
		}
		// Ended in reverse seq order (r4 first): expiry, not seq, orders
		// removal.
		for i := 4; i >= 0; i-- {
			h.del(store.DeleteParams{Ref: delayq.Ref{Seq: seqs[i]}, Now: at(int64(10 - i))})
		}
		firstEnd := at(6).Add(retainFor) // r4's
		check(t, "Tick() before any retention ends", h.tick(at(100), 0), &store.TickResult{Next: firstEnd})
		check(t, "Tick(first end - 1ms)", h.tick(firstEnd.Add(-time.Millisecond), 0), &store.TickResult{Next: firstEnd})
		now := at(8).Add(retainFor) // r4, r3, r2 expired; r1, r0 not yet
		clock.Set(now)
		check(t, "Tick(3 expired, max 2)", h.tick(now, 2), &store.TickResult{Expired: 2, Next: now})
		check(t, "Tick(1 expired, max 2)", h.tick(now, 2), &store.TickResult{Expired: 1, Next: at(9).Add(retainFor)})
		check(t, "Tick(none expired)", h.tick(now, 2), &store.TickResult{Next: at(9).Add(retainFor)})
		for i := range 5 {
			err := seqErr(h, seqs[i])
			if i >= 2 {
				checkErr(t, fmt.Sprintf("Get(#seq of r%d) expired", i), err, delayq.ErrNotFound)
			} else {
				checkErr(t, fmt.Sprintf("Get(#seq of r%d) not expired", i), err, nil)
			}
		}
		later := at(10).Add(retainFor)
		clock.Set(later)
		check(t, "Tick(the rest expired)", h.tick(later, 0), &store.TickResult{Expired: 2, Next: far.Due})
		check(t, "Get(far) after the expiries", h.get(delayq.Ref{ID: "far"}), far)
	})
}

// testRetainedReopen checks the window across a restart: a reopened store
// still shows its retained jobs, refuses their ids, and expires them.
func testRetainedReopen(t *testing.T, f Factory) {
	if f.Reopen == nil {
		t.Skip("Factory.Reopen is nil: the store is not durable")
	}
	h, clock := openRetaining(t, f, retainFor, true)
	h.put(ready("a", "t"), ready("b", "t"))
	a := h.reserveBy(at(1), "t", "c1")
	h.del(store.DeleteParams{Ref: held(a), Now: at(2)})
	b := h.get(delayq.Ref{ID: "b"})
	want := asRetained(a, delayq.StateFinished, at(2), delayq.OutcomeFinished, true)
	h.reopen()
	checkHist(t, "Get(a) after reopen", h.get(delayq.Ref{ID: "a"}), want)
	checkHist(t, "Get(#seq of a) after reopen", h.get(delayq.Ref{Seq: a.Seq}), want)
	check(t, "List(t, finished) after reopen", ids(h.list("t", delayq.StateFinished, 0)), "a")
	err := h.s.Put(h.ctx, []*delayq.Job{ready("a", "t")})
	if got := existsState(t, "Put(a) after reopen", err, "a"); got != delayq.StateFinished {
		t.Errorf("Put(a) after reopen: ExistsError.State = %q, want finished", got)
	}
	checkHist(t, "Get(b) after reopen", h.get(delayq.Ref{ID: "b"}), b)
	end := at(2).Add(retainFor)
	clock.Set(end)
	checkErr(t, "Get(a) after reopen, expired", getErr(h, "a"), delayq.ErrNotFound)
	if !f.ExpiresItself {
		check(t, "Tick() after reopen, a expired", h.tick(end, 0), &store.TickResult{Expired: 1})
		h.reopen()
		checkErr(t, "Get(#seq of a) after its removal and a reopen", seqErr(h, a.Seq), delayq.ErrNotFound)
	}
	h.put(ready("a", "t"))
}
