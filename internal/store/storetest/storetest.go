// Package storetest is the conformance suite every store.Store must pass.
//
// A backend's test calls Run with a Factory that opens empty stores. The
// suite is timing-free: every call gets an explicit Now (a fixed base time
// plus offsets), it never sleeps and never reads the clock. Besides one
// subtest per rule of the contract in package store, it runs a randomised
// op sequence against the store and against memstore as the model and
// compares every result (Pebble's metamorphic testing, scaled down).
//
// It owns no store and holds no state between tests.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Factory opens the stores under test.
type Factory struct {
	// Open returns a new, empty store; the suite closes it.
	Open func(t *testing.T) store.Store
	// Reopen, if set, closes s and opens the same data again (durable
	// stores); the persistence tests run only when it is set. The suite
	// closes the store it returns.
	Reopen func(t *testing.T, s store.Store) store.Store
	// OpenRetaining, if set, returns a new, empty store that keeps the
	// jobs it removes as r says (store.Retention); the history tests
	// (attempts, retained jobs, the idempotency window) run only when it
	// is set. Reopen must reopen such a store with the same retention.
	OpenRetaining func(t *testing.T, r store.Retention) store.Store
	// ExpiresItself says the store removes expired retained jobs by
	// itself (Redis key TTLs) rather than in Tick: the tests of Tick's
	// removals (TickResult.Expired, Next at the earliest expiry) skip.
	ExpiresItself bool
	// HandsOff says the store hands jobs a Tick makes ready to the
	// waiting reserves TickParams.Claim names; the hand-off group runs
	// only when it is set.
	HandsOff bool
}

// Run runs the whole suite against stores from f.
func Run(t *testing.T, f Factory) {
	t.Helper()
	if f.Open == nil {
		t.Fatal("storetest.Run: Factory.Open is nil")
	}
	groups := []struct {
		name string
		run  func(t *testing.T, f Factory)
	}{
		{"Put", testPut},
		{"Get", testGet},
		{"Reserve", testReserve},
		{"Tick", testTick},
		{"TickHandOff", testTickHandOff},
		{"TickBackoff", testTickBackoff},
		{"Release", testRelease},
		{"Touch", testTouch},
		{"Bury", testBury},
		{"Kick", testKick},
		{"KickJob", testKickJob},
		{"ReserveJob", testReserveJob},
		{"Delete", testDelete},
		{"DeleteBatch", testDeleteBatch},
		{"StaleReservation", testStaleReservation},
		{"GiveBack", testGiveBack},
		{"DeadlineRoundsUp", testDeadlineRoundsUp},
		{"Update", testUpdate},
		{"List", testList},
		{"Topics", testTopics},
		{"Close", testClose},
		{"Persistence", testPersistence},
		{"Random", testRandom},
		{"Docs", testDocs},
		{"Schedules", testSchedules},
		{"DueCounts", testDueCounts},
		{"Series", testSeries},
		{"History", testHistory},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { g.run(t, f) })
	}
}

// base is the suite's fixed "now", on a millisecond boundary.
var base = time.Date(2030, time.March, 4, 5, 6, 7, 890_000_000, time.UTC)

// at returns base plus ms milliseconds.
func at(ms int64) time.Time { return base.Add(time.Duration(ms) * time.Millisecond) }

// cmpOpts treat nil and empty slices and maps alike, and compare
// latenesses in any order: the contract does not tell these apart. Times
// compare with time.Time.Equal (cmp's default). A job's History and Ended
// are compared only by the History group (history.go, histOpts), which
// runs for stores that keep them.
var cmpOpts = cmp.Options{
	cmpopts.EquateEmpty(),
	cmpopts.SortSlices(func(a, b time.Duration) bool { return a < b }),
	cmpopts.IgnoreFields(delayq.Job{}, "History", "Ended"),
}

// harness wraps a store under test with fatal-on-error helpers.
type harness struct {
	t      *testing.T
	f      Factory
	s      store.Store
	ctx    context.Context
	closed bool
}

// open returns a harness over a new empty store, closed at cleanup.
func open(t *testing.T, f Factory) *harness {
	t.Helper()
	h := &harness{t: t, f: f, s: f.Open(t), ctx: t.Context()}
	t.Cleanup(func() {
		if !h.closed {
			if err := h.s.Close(); err != nil {
				t.Errorf("Close() = %v, want nil", err)
			}
		}
	})
	return h
}

// newJob returns a job ready at now (due <= now) or delayed until due, with
// a body, the default priority and a 10 s TTR.
func newJob(id, topic string, now, due time.Time) *delayq.Job {
	j := &delayq.Job{
		ID:       id,
		Topic:    topic,
		Body:     []byte("body of " + id),
		Priority: delayq.DefaultPriority,
		TTR:      10 * time.Second,
		State:    delayq.StateReady,
		Due:      due,
		Created:  now,
	}
	if due.After(now) {
		j.State = delayq.StateDelayed
		j.Delay = due.Sub(now)
	}
	return j
}

// ready returns a job of topic ready at base.
func ready(id, topic string) *delayq.Job { return newJob(id, topic, base, base) }

// delayed returns a job of topic put at base and due at base+ms.
func delayed(id, topic string, ms int64) *delayq.Job { return newJob(id, topic, base, at(ms)) }

func ids(jobs []*delayq.Job) string {
	s := make([]string, len(jobs))
	for i, j := range jobs {
		s[i] = j.ID
	}
	return strings.Join(s, ",")
}

func (h *harness) put(jobs ...*delayq.Job) {
	h.t.Helper()
	if err := h.s.Put(h.ctx, jobs); err != nil {
		h.t.Fatalf("Put(%s) = %v, want nil", ids(jobs), err)
	}
}

func (h *harness) get(ref delayq.Ref) *delayq.Job {
	h.t.Helper()
	j, err := h.s.Get(h.ctx, ref)
	if err != nil {
		h.t.Fatalf("Get(%s) = %v, want a job", ref, err)
	}
	return j
}

func (h *harness) reserve(now time.Time, limit int, topics ...string) []*delayq.Job {
	h.t.Helper()
	p := store.ReserveParams{Topics: topics, Max: limit, Now: now}
	jobs, err := h.s.Reserve(h.ctx, p)
	if err != nil {
		h.t.Fatalf("Reserve(%+v) = %v, want nil error", p, err)
	}
	return jobs
}

// reserveOne reserves exactly one job of topic at now.
func (h *harness) reserveOne(now time.Time, topic string) *delayq.Job {
	h.t.Helper()
	jobs := h.reserve(now, 1, topic)
	if len(jobs) != 1 {
		h.t.Fatalf("Reserve(%s, max 1, now %s) = %d jobs, want 1", topic, now, len(jobs))
	}
	return jobs[0]
}

func (h *harness) tick(now time.Time, limit int) *store.TickResult {
	h.t.Helper()
	res, err := h.s.Tick(h.ctx, store.TickParams{Now: now, Max: limit})
	if err != nil {
		h.t.Fatalf("Tick(%s, max %d) = %v, want nil error", now, limit, err)
	}
	return res
}

func (h *harness) pause(topic string, until time.Time) {
	h.t.Helper()
	if err := h.s.Pause(h.ctx, store.PauseParams{Topic: topic, Until: until}); err != nil {
		h.t.Fatalf("Pause(%s, %s) = %v, want nil", topic, until, err)
	}
}

func (h *harness) topics() []delayq.TopicStats {
	h.t.Helper()
	ts, err := h.s.Topics(h.ctx)
	if err != nil {
		h.t.Fatalf("Topics() = %v, want nil error", err)
	}
	return ts
}

// list pages through topic's jobs in state, limit per page, and returns
// them all.
func (h *harness) list(topic string, state delayq.State, limit int) []*delayq.Job {
	h.t.Helper()
	var all []*delayq.Job
	p := store.ListParams{Topic: topic, State: state, Limit: limit}
	for page := 0; ; page++ {
		res, err := h.s.List(h.ctx, p)
		if err != nil {
			h.t.Fatalf("List(%+v) = %v, want nil error", p, err)
		}
		if limit > 0 && len(res.Jobs) > limit {
			h.t.Fatalf("List(%+v) = %d jobs, want at most %d", p, len(res.Jobs), limit)
		}
		all = append(all, res.Jobs...)
		if res.Next == "" {
			return all
		}
		if page > 10000 {
			h.t.Fatalf("List(%+v): cursor never ends", p)
		}
		p.Cursor = res.Next
	}
}

// check reports got != want as "call = got, want want" with a diff.
func check(t *testing.T, call string, got, want any) {
	t.Helper()
	if diff := cmp.Diff(want, got, cmpOpts); diff != "" {
		t.Errorf("%s = %v, want %v\ndiff (-want +got):\n%s", call, show(got), show(want), diff)
	}
}

// checkErr reports err not matching want (nil: no error).
func checkErr(t *testing.T, call string, err, want error) {
	t.Helper()
	switch {
	case want == nil && err != nil:
		t.Errorf("%s = %v, want nil error", call, err)
	case want != nil && !errors.Is(err, want):
		t.Errorf("%s = %v, want an error wrapping %v", call, err, want)
	}
}

// show formats jobs readably in failure messages.
func show(v any) any {
	switch v := v.(type) {
	case *delayq.Job:
		if v == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%+v", *v)
	case []*delayq.Job:
		s := make([]any, len(v))
		for i, j := range v {
			s[i] = show(j)
		}
		return s
	case *store.TickResult:
		if v == nil {
			return "<nil>"
		}
		return fmt.Sprintf("%+v", *v)
	}
	return v
}

func u32(v uint32) *uint32 { return &v }

// reserved returns want (a clone of j) as the attempts-th reserve at now
// leaves it.
func reservedAs(j *delayq.Job, now time.Time) *delayq.Job {
	w := j.Clone()
	w.State = delayq.StateReserved
	w.Attempts++
	w.Reservation = delayq.ReservationToken(w.Seq, w.Attempts)
	w.Deadline = now.Add(w.TTR)
	return w
}
