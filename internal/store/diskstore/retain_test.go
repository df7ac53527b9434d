package diskstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// fakeClock is a retention clock the test moves.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.now = t
	c.mu.Unlock()
}

// retainingStore opens a store in dir that keeps deleted jobs for an
// hour by clock.
func retainingStore(t *testing.T, dir string, clock *fakeClock, bodies bool) *Store {
	t.Helper()
	return openAt(t, dir, Options{MinFree: -1, Retention: store.Retention{For: time.Hour, Bodies: bodies, Now: clock.Now}})
}

func mustPut(t *testing.T, s *Store, jobs ...*delayq.Job) {
	t.Helper()
	if err := s.Put(t.Context(), jobs); err != nil {
		t.Fatalf("Put = %v", err)
	}
}

// reserveOne reserves the next ready job of topic at now, by by.
func reserveOne(t *testing.T, s *Store, topic string, now time.Time, by string) *delayq.Job {
	t.Helper()
	got, err := s.Reserve(t.Context(), store.ReserveParams{Topics: []string{topic}, Max: 1, Now: now, By: by})
	if err != nil || len(got) != 1 {
		t.Fatalf("Reserve(%s) = %v, %v; want one job", topic, got, err)
	}
	return got[0]
}

// countKeys counts the keys of each prefix byte in the store's Pebble
// database (the open group committed first).
func countKeys(t *testing.T, s *Store) map[byte]int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	it, err := s.iter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer it.Close()
	n := map[byte]int{}
	for ok := it.First(); ok; ok = it.Next() {
		n[it.Key()[0]]++
	}
	return n
}

// TestRetainedJobLifecycle follows a finished job through its
// retention: readable by id and seq, listed, its id taken, no
// transition, not counted, kept across a restart, then invisible once
// its retention ran out, removed by Tick, and its id free again. On the
// old code the delete removed it at once.
func TestRetainedJobLifecycle(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	clock := &fakeClock{now: t0}
	s := retainingStore(t, dir, clock, false)
	mustPut(t, s, crashJob("done", false), crashJob("other", false))
	r := reserveOne(t, s, "crash", t0, "alice")
	if r.ID != "done" {
		t.Fatalf("reserved %s, want done", r.ID)
	}
	end := t0.Add(5 * time.Second)
	got, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "done", Reservation: r.Reservation}, Now: end})
	if err != nil {
		t.Fatal(err)
	}
	wantHist := []delayq.Attempt{{N: 1, Reserved: t0, By: "alice", Ended: end, Outcome: delayq.OutcomeFinished}}
	if got.State != delayq.StateReserved || !cmp.Equal(got.History, wantHist) {
		t.Errorf("Delete returned %s with history %+v, want the reserved job with its attempt finished", got.State, got.History)
	}
	want := &delayq.Job{ID: "done", Seq: r.Seq, Topic: "crash", State: delayq.StateFinished, TTR: time.Hour, Due: t0, Created: t0,
		Attempts: 1, History: wantHist, Ended: end}
	check := func(s *Store) {
		t.Helper()
		for _, ref := range []delayq.Ref{{ID: "done"}, {Seq: r.Seq}} {
			j, err := s.Get(ctx, ref)
			if err != nil {
				t.Fatalf("Get(%s) = %v", ref, err)
			}
			if diff := cmp.Diff(want, j); diff != "" {
				t.Errorf("Get(%s) differs (-want +got):\n%s", ref, diff)
			}
		}
		var ee *delayq.ExistsError
		if err := s.Put(ctx, []*delayq.Job{crashJob("done", false)}); !errors.As(err, &ee) || ee.State != delayq.StateFinished {
			t.Errorf("Put(done) = %v, want an *ExistsError with state finished", err)
		}
		l, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateFinished})
		if err != nil || len(l.Jobs) != 1 || l.Jobs[0].ID != "done" {
			t.Errorf("List(finished) = %+v, %v; want done", l, err)
		}
		if l, _ := s.List(ctx, store.ListParams{Topic: "crash"}); len(l.Jobs) != 1 || l.Jobs[0].ID != "other" {
			t.Errorf("List() = %+v, want only the live job", l.Jobs)
		}
		sts, err := s.Topics(ctx)
		if err != nil || len(sts) != 1 || sts[0].Ready != 1 || sts[0].Reserved != 0 {
			t.Errorf("Topics() = %+v, %v; want one ready job and nothing else", sts, err)
		}
		for name, call := range map[string]func() error{
			"Release": func() error {
				_, err := s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: "done", Reservation: r.Reservation}, Now: end})
				return err
			},
			"Delete": func() error {
				_, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "done"}, Force: true, Now: end})
				return err
			},
			"KickJob": func() error {
				_, err := s.KickJob(ctx, store.KickJobParams{Ref: delayq.Ref{ID: "done"}, Now: end})
				return err
			},
			"Update": func() error { _, err := s.Update(ctx, store.UpdateParams{Ref: delayq.Ref{Seq: r.Seq}}); return err },
			"ReserveJob": func() error {
				_, err := s.ReserveJob(ctx, store.ReserveJobParams{Ref: delayq.Ref{ID: "done"}, Now: end})
				return err
			},
		} {
			if err := call(); !errors.Is(err, delayq.ErrNotFound) {
				t.Errorf("%s of a retained job = %v, want ErrNotFound", name, err)
			}
		}
	}
	check(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = retainingStore(t, dir, clock, false)
	defer func() { _ = s.Close() }()
	check(s)

	// Tick before the end of the retention removes nothing and names it
	// as the next thing to do.
	res, err := s.Tick(ctx, store.TickParams{Now: end.Add(time.Minute)})
	if err != nil || res.Expired != 0 || !res.Next.Equal(end.Add(time.Hour)) {
		t.Fatalf("Tick before expiry = %+v, %v; want nothing expired and Next at %v", res, err, end.Add(time.Hour))
	}
	// Past it: invisible at once, by the retention's clock.
	clock.set(end.Add(time.Hour))
	if _, err := s.Get(ctx, delayq.Ref{ID: "done"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get after the retention = %v, want ErrNotFound", err)
	}
	if l, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateFinished}); err != nil || len(l.Jobs) != 0 {
		t.Errorf("List(finished) after the retention = %+v, %v; want none", l, err)
	}
	res, err = s.Tick(ctx, store.TickParams{Now: end.Add(time.Hour)})
	if err != nil || res.Expired != 1 || !res.Next.IsZero() {
		t.Fatalf("Tick at expiry = %+v, %v; want 1 expired and nothing next", res, err)
	}
	keys := countKeys(t, s)
	if keys[prefixExpiry] != 0 || keys[prefixJob] != 1 || keys[prefixSeq] != 1 || keys[prefixIndex] != 1 {
		t.Errorf("keys after expiry = %v, want only the live job's J, S and X", keys)
	}
	mustPut(t, s, crashJob("done", false))
}

// TestRetainedStates: a delete keeps the job as failed when it was
// buried, deleted when it was not held, deleted (its attempt too) when
// an operator forces it out of its consumer's hands; bodies are kept
// only when asked.
func TestRetainedStates(t *testing.T) {
	ctx := t.Context()
	for _, bodies := range []bool{false, true} {
		t.Run(fmt.Sprintf("bodies=%v", bodies), func(t *testing.T) {
			clock := &fakeClock{now: t0}
			s := retainingStore(t, t.TempDir(), clock, bodies)
			defer func() { _ = s.Close() }()
			mustPut(t, s, crashJob("buried", false), crashJob("forced", false), crashJob("ready", false))
			b := reserveOne(t, s, "crash", t0, "c1")
			if _, err := s.Bury(ctx, store.BuryParams{Ref: delayq.Ref{ID: b.ID, Reservation: b.Reservation}, Reason: "boom", Now: t0}); err != nil {
				t.Fatal(err)
			}
			f := reserveOne(t, s, "crash", t0, "c2")
			end := t0.Add(time.Second)
			jobs, errs, err := s.DeleteBatch(ctx, []store.DeleteParams{
				{Ref: delayq.Ref{ID: "buried"}, Now: end},
				{Ref: delayq.Ref{ID: "forced"}, Force: true, Now: end},
				{Ref: delayq.Ref{ID: "ready"}, Now: end},
				{Ref: delayq.Ref{ID: "ready"}, Now: end},
			})
			if err != nil || errs[0] != nil || errs[1] != nil || errs[2] != nil || !errors.Is(errs[3], delayq.ErrNotFound) {
				t.Fatalf("DeleteBatch = %v, %v", errs, err)
			}
			if jobs[1].History[0].Outcome != delayq.OutcomeDeleted {
				t.Errorf("forced delete returned history %+v, want its attempt deleted", jobs[1].History)
			}
			for id, st := range map[string]delayq.State{"buried": delayq.StateFailed, "forced": delayq.StateDeleted, "ready": delayq.StateDeleted} {
				j, err := s.Get(ctx, delayq.Ref{ID: id})
				if err != nil {
					t.Fatalf("Get(%s) = %v", id, err)
				}
				if j.State != st || !j.Ended.Equal(end) || j.Reservation != "" || !j.Deadline.IsZero() {
					t.Errorf("%s: state %s ended %v reservation %q deadline %v; want %s ended %v, no reservation", id, j.State, j.Ended, j.Reservation, j.Deadline, st, end)
				}
				if wantBody := bodies; (j.Body != nil) != wantBody || (bodies && string(j.Body) != id) {
					t.Errorf("%s: body %q with bodies=%v", id, j.Body, bodies)
				}
			}
			if j, _ := s.Get(ctx, delayq.Ref{ID: "forced"}); len(j.History) != 1 || j.History[0].Outcome != delayq.OutcomeDeleted || j.History[0].By != "c2" {
				t.Errorf("forced: history %+v, want one attempt by c2, deleted", j.History)
			}
			if j, _ := s.Get(ctx, delayq.Ref{ID: "buried"}); len(j.History) != 1 || j.History[0].Outcome != delayq.OutcomeBuried || j.History[0].Reason != "boom" {
				t.Errorf("buried: history %+v, want one attempt buried for boom", j.History)
			}
			_ = f
		})
	}
}

// TestRetainedListPages lists a state by Ended then seq, in pages, and
// skips what expired before Tick removed it.
func TestRetainedListPages(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: t0}
	s := retainingStore(t, t.TempDir(), clock, false)
	defer func() { _ = s.Close() }()
	var want []string
	for i := range 7 {
		id := fmt.Sprintf("j%d", i)
		mustPut(t, s, crashJob(id, false))
	}
	// Ended in the order 3,4,5,6 then 0,1,2 (two per millisecond).
	for k, i := range []int{3, 4, 5, 6, 0, 1, 2} {
		id := fmt.Sprintf("j%d", i)
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id}, Now: t0.Add(time.Duration(k/2) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	var got []string
	cursor := ""
	for {
		l, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateDeleted, Limit: 2, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		for _, j := range l.Jobs {
			got = append(got, j.ID)
		}
		if cursor = l.Next; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("retained jobs listed (-want +got):\n%s", diff)
	}
	// The first two ended at t0: an hour later they are gone from the list.
	clock.set(t0.Add(time.Hour))
	l, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateDeleted})
	if err != nil || len(l.Jobs) != 5 || l.Jobs[0].ID != "j5" {
		t.Errorf("List after the first two expired = %v, %v; want j5 first of 5", l, err)
	}
	if l, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateFailed}); err != nil || len(l.Jobs) != 0 {
		t.Errorf("List(failed) = %v, %v; want none", l, err)
	}
}

// TestTickExpiresInBounds: Tick removes at most Max expired jobs per
// call, says there is more (Next = now), and leaves no key of them; its
// count is what expired, whatever it promoted.
func TestTickExpiresInBounds(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: t0}
	s := retainingStore(t, t.TempDir(), clock, true)
	defer func() { _ = s.Close() }()
	for i := range 5 {
		id := fmt.Sprintf("e%d", i)
		mustPut(t, s, crashJob(id, false))
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id}, Now: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	mustPut(t, s, crashJob("live", true))
	now := t0.Add(time.Hour + 3*time.Millisecond) // e0..e3 are due to go
	res, err := s.Tick(ctx, store.TickParams{Now: now, Max: 3})
	if err != nil || res.Expired != 3 || !res.Next.Equal(now) {
		t.Fatalf("Tick(max 3) = %+v, %v; want 3 expired and more now", res, err)
	}
	res, err = s.Tick(ctx, store.TickParams{Now: now, Max: 3})
	if err != nil || res.Expired != 1 || !res.Next.Equal(t0.Add(time.Hour+4*time.Millisecond)) {
		t.Fatalf("second Tick = %+v, %v; want 1 expired and e4's expiry next", res, err)
	}
	if keys := countKeys(t, s); keys[prefixExpiry] != 1 || keys[prefixJob] != 2 || keys[prefixSeq] != 2 || keys[prefixIndex] != 2 {
		t.Errorf("keys = %v, want those of e4 and the live job", keys)
	}
	// The next expiry comes after the live job's due time, which Next
	// names first once e4 is gone.
	res, err = s.Tick(ctx, store.TickParams{Now: t0.Add(2 * time.Hour)})
	if err != nil || res.Expired != 1 || !res.Next.Equal(t0.Add(24*time.Hour)) {
		t.Fatalf("third Tick = %+v, %v; want e4 expired and the live job's due time next", res, err)
	}
}

// TestPutTakesExpiredID: once a retained job's retention ran out, a put
// of its id succeeds before Tick removed it, and the later Tick leaves
// the new live job alone.
func TestPutTakesExpiredID(t *testing.T) {
	ctx := t.Context()
	clock := &fakeClock{now: t0}
	s := retainingStore(t, t.TempDir(), clock, false)
	defer func() { _ = s.Close() }()
	mustPut(t, s, crashJob("again", false))
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "again"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	clock.set(t0.Add(time.Hour))
	again := crashJob("again", false)
	mustPut(t, s, again)
	res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(2 * time.Hour)})
	if err != nil || res.Expired != 0 {
		t.Fatalf("Tick = %+v, %v; want nothing expired", res, err)
	}
	j, err := s.Get(ctx, delayq.Ref{ID: "again"})
	if err != nil || j.State != delayq.StateReady || j.Seq != again.Seq {
		t.Fatalf("Get(again) = %+v, %v; want the new live job", j, err)
	}
	if l, _ := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateDeleted}); len(l.Jobs) != 0 {
		t.Errorf("List(deleted) = %v, want none", l.Jobs)
	}
	if keys := countKeys(t, s); keys[prefixExpiry] != 0 || keys[prefixSeq] != 1 || keys[prefixIndex] != 1 {
		t.Errorf("keys = %v, want only the new job's", keys)
	}
}

// TestRetentionOffAfterRestart: a store reopened without retention
// hides and removes what an earlier run kept; one reopened with a
// shorter retention expires by the new one.
func TestRetentionOffAfterRestart(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	clock := &fakeClock{now: t0}
	s := retainingStore(t, dir, clock, false)
	mustPut(t, s, crashJob("kept", false))
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "kept"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{MinFree: -1, Retention: store.Retention{Now: clock.Now}})
	defer func() { _ = s.Close() }()
	if _, err := s.Get(ctx, delayq.Ref{ID: "kept"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get without retention = %v, want ErrNotFound", err)
	}
	res, err := s.Tick(ctx, store.TickParams{Now: t0})
	if err != nil || res.Expired != 1 {
		t.Fatalf("Tick = %+v, %v; want the kept job removed", res, err)
	}
	mustPut(t, s, crashJob("gone", false))
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "gone"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if keys := countKeys(t, s); keys[prefixJob] != 0 || keys[prefixExpiry] != 0 {
		t.Errorf("keys = %v, want no job left", keys)
	}
}

// TestHistoryKeepsTwenty: 25 reserve-release rounds leave the last 20
// attempts, each with its outcome, through a restart; a TTR expiry and a
// give-back end theirs as the contract says.
func TestHistoryKeepsTwenty(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	mustPut(t, s, crashJob("h", false))
	now := t0
	for i := range 25 {
		r := reserveOne(t, s, "crash", now, fmt.Sprintf("c%d", i))
		now = now.Add(time.Second)
		if _, err := s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: "h", Reservation: r.Reservation}, Reason: fmt.Sprint("r", i), Due: now, Now: now}); err != nil {
			t.Fatal(err)
		}
	}
	r := reserveOne(t, s, "crash", now, "giver")
	if _, err := s.GiveBack(ctx, store.GiveBackParams{Ref: delayq.Ref{ID: "h", Reservation: r.Reservation}}); err != nil {
		t.Fatal(err)
	}
	r = reserveOne(t, s, "crash", now, "sleeper")
	if _, err := s.Tick(ctx, store.TickParams{Now: r.Deadline}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	defer func() { _ = s.Close() }()
	j, err := s.Get(ctx, delayq.Ref{ID: "h"})
	if err != nil {
		t.Fatal(err)
	}
	if len(j.History) != delayq.MaxHistory {
		t.Fatalf("%d attempts kept, want %d", len(j.History), delayq.MaxHistory)
	}
	first := j.History[0]
	if first.N != 8 || first.By != "c7" || first.Outcome != delayq.OutcomeReleased || first.Reason != "r7" || !first.Ended.Equal(t0.Add(8*time.Second)) {
		t.Errorf("oldest attempt kept = %+v, want round 7's", first)
	}
	gave, slept := j.History[18], j.History[19]
	if gave.By != "giver" || gave.Outcome != delayq.OutcomeGaveBack || !gave.Ended.Equal(gave.Reserved) {
		t.Errorf("give-back attempt = %+v", gave)
	}
	if slept.By != "sleeper" || slept.Outcome != delayq.OutcomeTTRExpired || slept.Reason != delayq.ReasonTTRExpired || !slept.Ended.Equal(r.Deadline) {
		t.Errorf("expired attempt = %+v", slept)
	}
}

// copyV2Store copies testdata/v2store, a store of format version 2
// written by this package before job history (commit 3d6dfe1, main before
// it): 20 jobs in topics "orders" and "mail" of every live state, one
// buried with a reason and one released with one, part in an sstable and
// part only in the WAL, and one deleted.
func copyV2Store(t *testing.T) string {
	t.Helper()
	return copyTestdata(t, "v2store")
}

// TestUpgradeV2Store opens a store written by the code before history:
// its records read as they are, it is marked version 4 (so an older
// build refuses it), and its jobs gain history from then on.
func TestUpgradeV2Store(t *testing.T) {
	ctx := t.Context()
	dir := copyV2Store(t)
	var logs bytes.Buffer
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !strings.Contains(logs.String(), "upgraded the store from format version 2 to 4") {
		t.Errorf("log = %q, want the upgrade", logs.String())
	}
	sts, err := s.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][4]int{}
	for _, st := range sts {
		got[st.Name] = [4]int{st.Delayed, st.Ready, st.Reserved, st.Buried}
	}
	if diff := cmp.Diff(map[string][4]int{"orders": {3, 7, 1, 1}, "mail": {4, 3, 0, 0}}, got); diff != "" {
		t.Fatalf("topics (-want +got):\n%s", diff)
	}
	if j, err := s.Get(ctx, delayq.Ref{ID: "v2-01"}); err != nil || j.State != delayq.StateBuried || j.LastReason != "gateway 502" || len(j.History) != 0 {
		t.Errorf("Get(v2-01) = %+v, %v; want the buried job, its reason, no history", j, err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "v2-mail-00"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get(deleted v2-mail-00) = %v, want ErrNotFound", err)
	}
	r := reserveOne(t, s, "mail", time.UnixMilli(1_900_000_000_000), "new")
	if len(r.History) != 1 || r.History[0].By != "new" {
		t.Errorf("reserved %+v, want one attempt by new", r.History)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	v, closer, err := db.Get(metaVersionKey)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(v, []byte{0, 0, 0, 4}) {
		t.Errorf("version = %x, want 4", v)
	}
	_ = closer.Close()
	_ = db.Close()
	logs.Reset()
	s = openAt(t, dir, Options{MinFree: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() { _ = s.Close() }()
	if strings.Contains(logs.String(), "upgraded") {
		t.Errorf("second open logged %q, want no upgrade", logs.String())
	}
	if j, err := s.Get(ctx, delayq.Ref{ID: r.ID}); err != nil || len(j.History) != 1 {
		t.Errorf("Get(%s) after reopen = %+v, %v; want its attempt", r.ID, j, err)
	}
}

// TestRepairKeepsRetained: repair rebuilds the retained jobs' keys from
// their records, so they stay readable and expire as before.
func TestRepairKeepsRetained(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	clock := &fakeClock{now: t0}
	s := retainingStore(t, dir, clock, false)
	mustPut(t, s, crashJob("r1", false), crashJob("live", false))
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "r1"}, Now: t0}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := repairAt(t, dir); rep.Jobs != 2 {
		t.Errorf("repair kept %d jobs, want 2", rep.Jobs)
	}
	s = retainingStore(t, dir, clock, false)
	defer func() { _ = s.Close() }()
	if j, err := s.Get(ctx, delayq.Ref{ID: "r1"}); err != nil || j.State != delayq.StateDeleted {
		t.Fatalf("Get(r1) after repair = %+v, %v", j, err)
	}
	if sts, _ := s.Topics(ctx); len(sts) != 1 || sts[0].Ready != 1 {
		t.Errorf("Topics after repair = %+v, want the live job only", sts)
	}
	if res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(time.Hour)}); err != nil || res.Expired != 1 {
		t.Errorf("Tick = %+v, %v; want r1 expired", res, err)
	}
}

// TestExpiryReadsOnlyWhatExpires: Tick's expiry scan starts past what it
// removed and does not run while memory says nothing expires. Damaged E
// keys written behind the cursor, and past the last one while memory
// knows of none, are not read (a read logs them) until a due job takes
// the scan past them, so the cost of expiry follows what expires, not
// what was kept or removed.
func TestExpiryReadsOnlyWhatExpires(t *testing.T) {
	ctx := t.Context()
	var logs bytes.Buffer
	s := openAt(t, t.TempDir(), Options{MinFree: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Retention: store.Retention{For: time.Hour, Now: func() time.Time { return t0 }}})
	defer func() { _ = s.Close() }()
	for i := range 3 {
		id := fmt.Sprintf("x%d", i)
		mustPut(t, s, crashJob(id, false))
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: id}, Now: t0.Add(time.Duration(i) * time.Millisecond)}); err != nil {
			t.Fatal(err)
		}
	}
	garbage := func(ended time.Time) {
		t.Helper()
		k := expiryKey(&delayq.Job{Ended: ended, Seq: 1 << 40})
		if err := s.db.Set(k, []byte{0xff}, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(time.Hour + time.Millisecond)}); err != nil || res.Expired != 2 {
		t.Fatalf("Tick = %+v, %v; want 2 expired", res, err)
	}
	garbage(t0) // behind the cursor
	if res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(time.Hour + 2*time.Millisecond)}); err != nil || res.Expired != 1 || !res.Next.IsZero() {
		t.Fatalf("Tick = %+v, %v; want the third expired, nothing next, the key behind the cursor unread", res, err)
	}
	garbage(t0.Add(time.Millisecond * 3)) // past the end, unknown to memory
	if res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(2 * time.Hour)}); err != nil || res.Expired != 0 {
		t.Fatalf("Tick = %+v, %v; want no scan while memory knows of nothing to expire", res, err)
	}
	if strings.Contains(logs.String(), "damaged") {
		t.Fatalf("log = %q: a damaged key was read before a scan reached it", logs.String())
	}
	// A job retained now is noted in memory, and the scan that finds it
	// due reads from the cursor on: there it meets the damaged key, which
	// it logs and steps over instead of failing every Tick.
	mustPut(t, s, crashJob("late", false))
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "late"}, Now: t0.Add(2 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(3 * time.Hour)}); err != nil || res.Expired != 1 {
		t.Fatalf("Tick over a damaged E key = %+v, %v; want it skipped and late expired", res, err)
	}
	if !strings.Contains(logs.String(), "damaged expiry index entry") {
		t.Errorf("log = %q, want the damaged entry reported", logs.String())
	}
}
