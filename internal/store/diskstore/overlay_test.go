package diskstore

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// rawGet reads key from the closed store at dir.
func rawGet(t *testing.T, dir string, key []byte) ([]byte, bool) {
	t.Helper()
	db := rawDB(t, dir)
	defer func() { _ = db.Close() }()
	v, closer, err := db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	return bytes.Clone(v), true
}

// rawSet writes key = v into the closed store at dir.
func rawSet(t *testing.T, dir string, key, v []byte) {
	t.Helper()
	db := rawDB(t, dir)
	if err := db.Set(key, v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// reservedJob puts one ready job and reserves it twice (a release between)
// in a store at dir, then closes the store: the second reserve is
// written as an overlay over the record of the released job.
func reservedJob(t *testing.T, dir string) (released, reserved *delayq.Job) {
	t.Helper()
	ctx := t.Context()
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	j := crashJob("ov", false)
	j.Body = bytes.Repeat([]byte("b"), 100)
	mustPut(t, s, j)
	r := reserveOne(t, s, "crash", t0, "alice")
	released, err := s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: r.ID, Reservation: r.Reservation}, Due: t0, Reason: "later", Now: t0.Add(time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	reserved = reserveOne(t, s, "crash", t0.Add(2*time.Second), "bob")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return released, reserved
}

// TestReserveWritesOverlay: a reserve leaves the job's record as the
// reserve found it and writes what it changed into the reserved X value;
// the job reads back (Get, List, after a reopen, from disk) exactly as
// the reserve returned it, and the next transition writes the whole
// record again.
func TestReserveWritesOverlay(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	released, reserved := reservedJob(t, dir)

	v, ok := rawGet(t, dir, jobKey("ov"))
	if !ok {
		t.Fatal("record missing")
	}
	rec, err := openRecord(v)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(released, rec); diff != "" {
		t.Errorf("record after the reserve is not the released job (-want +got):\n%s", diff)
	}
	xv, ok := rawGet(t, dir, indexKey(reserved))
	if !ok {
		t.Fatal("reserved X key missing")
	}
	if _, id, ov, err := splitIndexValue(xv); err != nil || string(id) != "ov" || ov == nil {
		t.Fatalf("reserved X value %x: id %q, overlay %x, %v; want an overlay", xv, id, ov, err)
	}

	for _, hot := range []int{-1, 0} { // from disk, then from memory after a load
		s := openAt(t, dir, Options{MinFree: -1, HotSize: hot})
		got, err := s.Get(ctx, delayq.Ref{ID: "ov"})
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(reserved, got); diff != "" {
			t.Errorf("HotSize %d: Get (-reserved +got):\n%s", hot, diff)
		}
		res, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateReserved})
		if err != nil || len(res.Jobs) != 1 {
			t.Fatalf("List = %+v, %v", res, err)
		}
		if diff := cmp.Diff(reserved, res.Jobs[0]); diff != "" {
			t.Errorf("HotSize %d: List (-reserved +got):\n%s", hot, diff)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A touch writes the whole record and a plain X value.
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	touched, err := s.Touch(ctx, store.TouchParams{Ref: delayq.Ref{ID: "ov", Reservation: reserved.Reservation}, Now: t0.Add(3 * time.Second)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	v, _ = rawGet(t, dir, jobKey("ov"))
	if rec, err = openRecord(v); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(touched, rec); diff != "" {
		t.Errorf("record after the touch (-touched +record):\n%s", diff)
	}
	if xv, ok = rawGet(t, dir, indexKey(touched)); !ok || !bytes.Equal(xv, indexValue(touched)) {
		t.Errorf("X value after the touch = %x, want the plain %x", xv, indexValue(touched))
	}
	if _, ok := rawGet(t, dir, indexKey(reserved)); ok {
		t.Error("the reserve's X key is still there after the touch")
	}

	// The finish (a retained delete would do the same) leaves nothing of
	// the reservation.
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "ov", Reservation: touched.Reservation}, Now: t0.Add(4 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	if got := countKeys(t, s); got[prefixJob]+got[prefixIndex]+got[prefixSeq] != 0 {
		t.Errorf("keys after the finish = %v, want no J, X or S", got)
	}
	_ = s.Close()
}

// TestDamagedOverlayIsCorrupt: an overlay whose bytes changed fails its
// checksum, so Get answers ErrCorrupt instead of a wrong reservation, and
// an overlay over a record it was not made from is refused too.
func TestDamagedOverlayIsCorrupt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, reserved *delayq.Job)
		want   string
	}{
		{"flipped byte", func(t *testing.T, dir string, reserved *delayq.Job) {
			xv, _ := rawGet(t, dir, indexKey(reserved))
			xv[len(xv)-6] ^= 1
			rawSet(t, dir, indexKey(reserved), xv)
		}, "checksum"},
		{"newer record", func(t *testing.T, dir string, reserved *delayq.Job) {
			rawSet(t, dir, jobKey("ov"), sealRecord(nil, reserved)) // already counts the attempt
		}, "reservation of attempt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			_, reserved := reservedJob(t, dir)
			tc.damage(t, dir, reserved)
			s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
			defer func() { _ = s.Close() }()
			_, err := s.Get(t.Context(), delayq.Ref{ID: "ov"})
			if !errors.Is(err, delayq.ErrCorrupt) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Get = %v, want ErrCorrupt about %q", err, tc.want)
			}
		})
	}
}

// TestRepairKeepsOverlay: repair reads the reservation overlays before
// the records they lie over, so a reserved job comes out reserved, with
// its attempt, in a store that writes it whole.
func TestRepairKeepsOverlay(t *testing.T) {
	dir := t.TempDir()
	_, reserved := reservedJob(t, dir)
	rep := repairAt(t, dir)
	if rep.Jobs != 1 || !rep.Clean() {
		t.Fatalf("repair report = %+v", rep)
	}
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	defer func() { _ = s.Close() }()
	got, err := s.Get(t.Context(), delayq.Ref{ID: "ov"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(reserved, got); diff != "" {
		t.Errorf("repaired job (-reserved +got):\n%s", diff)
	}
}

// copyV3Store copies testdata/v3store, a store of format version 3
// written by this package before reservation overlays (main at 4f33b35),
// with a fake clock at t0, in topic "orders": v3-r1 reserved by bob after
// a first attempt alice released ("try later"), in an sstable; then, only
// in the WAL, v3-r2 reserved by carol, v3-del force-deleted, v3-fin
// finished by dave, v3-bury buried by erin ("bad input"); v3-ready and
// v3-ready2 ready, v3-later delayed. Retention keeps bodies for 100,000
// hours.
func copyV3Store(t *testing.T) string {
	t.Helper()
	return copyTestdata(t, "v3store")
}

// TestUpgradeV3Store opens a store written before reservation overlays:
// every job reads as it was written, the store is marked version 4 (so
// an older build refuses it), and a reserve then writes an overlay that
// reads back after a reopen.
func TestUpgradeV3Store(t *testing.T) {
	ctx := t.Context()
	dir := copyV3Store(t)
	var logs bytes.Buffer
	clock := &fakeClock{now: t0.Add(time.Minute)}
	opts := Options{MinFree: -1, HotSize: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Retention: store.Retention{For: 100000 * time.Hour, Bodies: true, Now: clock.Now}}
	s := openAt(t, dir, opts)
	if !strings.Contains(logs.String(), "upgraded the store from format version 3 to 4") {
		t.Errorf("log = %q, want the upgrade", logs.String())
	}
	get := func(id string) *delayq.Job {
		t.Helper()
		j, err := s.Get(ctx, delayq.Ref{ID: id})
		if err != nil {
			t.Fatalf("Get(%s) = %v", id, err)
		}
		return j
	}
	r1 := get("v3-r1")
	if r1.State != delayq.StateReserved || r1.Attempts != 2 || r1.Reservation != delayq.ReservationToken(r1.Seq, 2) ||
		len(r1.History) != 2 || r1.History[0].By != "alice" || r1.History[0].Outcome != delayq.OutcomeReleased ||
		r1.History[1].By != "bob" || r1.History[1].Outcome != "" || r1.LastReason != "try later" {
		t.Errorf("v3-r1 = %+v", r1)
	}
	if r2 := get("v3-r2"); r2.State != delayq.StateReserved || len(r2.History) != 1 || r2.History[0].By != "carol" {
		t.Errorf("v3-r2 = %+v", r2)
	}
	if j := get("v3-bury"); j.State != delayq.StateBuried || j.LastReason != "bad input" {
		t.Errorf("v3-bury = %+v", j)
	}
	for id, st := range map[string]delayq.State{"v3-ready": delayq.StateReady, "v3-ready2": delayq.StateReady,
		"v3-later": delayq.StateDelayed, "v3-fin": delayq.StateFinished, "v3-del": delayq.StateDeleted} {
		if j := get(id); j.State != st || string(j.Body) != "body of "+id {
			t.Errorf("%s = %s %q, want %s with its body", id, j.State, j.Body, st)
		}
	}
	// A v3 reservation finishes as before.
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "v3-r2", Reservation: delayq.ReservationToken(get("v3-r2").Seq, 1)}, Now: t0.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r := reserveOne(t, s, "orders", t0.Add(time.Minute), "new")
	if r.ID != "v3-ready2" {
		t.Fatalf("reserved %s, want v3-ready2", r.ID)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if v, _ := rawGet(t, dir, metaVersionKey); !bytes.Equal(v, []byte{0, 0, 0, 4}) {
		t.Errorf("version = %x, want 4", v)
	}
	if xv, _ := rawGet(t, dir, indexKey(r)); bytes.IndexByte(xv[8:], overlayMark) < 0 {
		t.Errorf("the new reserve's X value %x has no overlay", xv)
	}
	logs.Reset()
	s = openAt(t, dir, opts)
	defer func() { _ = s.Close() }()
	if strings.Contains(logs.String(), "upgraded") {
		t.Errorf("second open logged %q, want no upgrade", logs.String())
	}
	if diff := cmp.Diff(r, get("v3-ready2")); diff != "" {
		t.Errorf("v3-ready2 after reopen (-reserved +got):\n%s", diff)
	}
	if j := get("v3-r1"); j.State != delayq.StateReserved || j.Attempts != 2 {
		t.Errorf("v3-r1 after reopen = %+v", j)
	}
}

// FuzzOverlay: any bytes as a reserved X value either apply to the record
// they name or are refused; they never panic, and a value that applies
// reads back as a reserved job one attempt on.
func FuzzOverlay(f *testing.F) {
	base := crashJob("ov", false)
	base.Seq = 7
	n := successor(base)
	store.ApplyReserve(n, t0)
	startAttempt(n, t0, "alice")
	f.Add(appendOverlayValue(nil, n))
	f.Add(indexValue(base))
	f.Add([]byte{})
	f.Add(append(indexValue(base), 0, 0, 0, 0, 0))
	f.Fuzz(func(t *testing.T, v []byte) {
		_, id, ov, err := splitIndexValue(v)
		if err != nil || ov == nil {
			return
		}
		b := crashJob(string(id), false)
		b.Seq = 7
		got, err := applyOverlay(b, ov)
		if err != nil {
			return
		}
		if got.State != delayq.StateReserved || got.Attempts != 1 || len(got.History) != 1 || got.ID != string(id) {
			t.Fatalf("applied %x: %+v", v, got)
		}
	})
}

// TestPromotionWritesNoRecord: the timer makes a delayed job ready
// without rewriting its record; the job reads back ready (Get, List,
// from disk and after a reopen), a reserve overlays that same record,
// and a repair brings the job back to be promoted again.
func TestPromotionWritesNoRecord(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	j := crashJob("later", true)
	mustPut(t, s, j)
	put, err := s.Get(ctx, delayq.Ref{ID: "later"})
	if err != nil {
		t.Fatal(err)
	}
	if res, err := s.Tick(ctx, store.TickParams{Now: j.Due}); err != nil || res.Ready["crash"] != 1 {
		t.Fatalf("Tick = %+v, %v; want one job made ready", res, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	v, _ := rawGet(t, dir, jobKey("later"))
	if rec, err := openRecord(v); err != nil || rec.State != delayq.StateDelayed {
		t.Fatalf("record after the promotion = %+v, %v; want the delayed record as it was", rec, err)
	}
	ready := put.Clone()
	ready.State = delayq.StateReady
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	got, err := s.Get(ctx, delayq.Ref{ID: "later"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(ready, got); diff != "" {
		t.Errorf("Get after the promotion (-want +got):\n%s", diff)
	}
	res, err := s.List(ctx, store.ListParams{Topic: "crash", State: delayq.StateReady})
	if err != nil || len(res.Jobs) != 1 {
		t.Fatalf("List = %+v, %v", res, err)
	}
	if diff := cmp.Diff(ready, res.Jobs[0]); diff != "" {
		t.Errorf("List after the promotion (-want +got):\n%s", diff)
	}
	r := reserveOne(t, s, "crash", j.Due.Add(time.Second), "alice")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	if got, err = s.Get(ctx, delayq.Ref{ID: "later"}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("Get of the reserved promoted job (-reserved +got):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Repair rebuilds from records: the job comes back reserved (its
	// overlay), over a record it reads as delayed; a job promoted and
	// not reserved comes back delayed and due.
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	mustPut(t, s, crashJob("later2", true))
	if _, err := s.Tick(ctx, store.TickParams{Now: j.Due}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := repairAt(t, dir); rep.Jobs != 2 || !rep.Clean() {
		t.Fatalf("repair report = %+v", rep)
	}
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	defer func() { _ = s.Close() }()
	if got, err = s.Get(ctx, delayq.Ref{ID: "later"}); err != nil || got.State != delayq.StateReserved || got.Reservation != r.Reservation {
		t.Errorf("repaired reserved job = %+v, %v", got, err)
	}
	if res, err := s.Tick(ctx, store.TickParams{Now: j.Due}); err != nil || res.Ready["crash"] != 1 {
		t.Errorf("Tick after repair = %+v, %v; want later2 made ready again", res, err)
	}
	if got, err = s.Get(ctx, delayq.Ref{ID: "later2"}); err != nil || got.State != delayq.StateReady {
		t.Errorf("repaired promoted job after Tick = %+v, %v", got, err)
	}
}
