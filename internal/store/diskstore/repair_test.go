package diskstore

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// repairAt runs Repair on dir with a fixed clock and returns its report.
func repairAt(t *testing.T, dir string) *RepairReport {
	t.Helper()
	var logs bytes.Buffer
	rep, err := Repair(t.Context(), dir, RepairOptions{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Now:    func() time.Time { return time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC) },
	})
	if err != nil {
		t.Fatalf("Repair(%s) = %v\nlog:\n%s", dir, err, logs.String())
	}
	if rep.DamagedDir != dir+".damaged-20300102T030405Z" {
		t.Errorf("DamagedDir = %q", rep.DamagedDir)
	}
	return rep
}

// present returns the ids of ids that Get finds in the store at dir.
func present(t *testing.T, dir string, ids []string) map[string]bool {
	t.Helper()
	s := openAt(t, dir, Options{MinFree: -1})
	defer func() { _ = s.Close() }()
	got := map[string]bool{}
	for _, id := range ids {
		if _, err := s.Get(t.Context(), delayq.Ref{ID: id}); err == nil {
			got[id] = true
		} else if !errors.Is(err, delayq.ErrNotFound) && !errors.Is(err, delayq.ErrCorrupt) {
			t.Fatalf("Get(%s) = %v", id, err)
		}
	}
	return got
}

// sameFiles fails unless dir holds exactly the files of want (by content),
// apart from LOCK.
func sameFiles(t *testing.T, want map[string][]byte, dir string) {
	t.Helper()
	got := snapshot(t, dir)
	for name, b := range want {
		if !bytes.Equal(got[name], b) {
			t.Errorf("%s/%s changed or missing after repair", dir, name)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%s holds %d files after repair, the original had %d", dir, len(got), len(want))
	}
}

func snapshot(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, e := range ents {
		if e.Type().IsRegular() && e.Name() != "LOCK" {
			b, err := os.ReadFile(filepath.Join(dir, e.Name()))
			if err != nil {
				t.Fatal(err)
			}
			out[e.Name()] = b
		}
	}
	return out
}

// TestRepairWALDamage: a flipped byte in the middle of the newest WAL
// makes Open refuse; Repair keeps every job but the one in the damaged
// record (those after it too, which Pebble alone would drop), reports the
// damage, keeps the original untouched, and the repaired store opens.
func TestRepairWALDamage(t *testing.T) {
	dir := t.TempDir()
	ids := writeJobs(t, dir, 300)
	wal := newestWAL(t, dir)
	fi, _ := os.Stat(wal)
	flipByte(t, wal, fi.Size()/2)
	if _, err := Open(dir, Options{MinFree: -1}); !errors.Is(err, delayq.ErrCorrupt) {
		t.Fatalf("Open(damaged) = %v, want ErrCorrupt", err)
	}
	orig := snapshot(t, dir)
	rep := repairAt(t, dir)
	sameFiles(t, orig, rep.DamagedDir)
	if rep.Jobs != 299 || rep.WALRecords == 0 || rep.Clean() || !strings.Contains(strings.Join(rep.Damage, "\n"), filepath.Base(wal)) {
		t.Fatalf("report = %+v, want 299 jobs, records applied after the damage, and damage naming %s", rep, filepath.Base(wal))
	}
	if got := present(t, dir, ids); len(got) != 299 {
		t.Fatalf("repaired store holds %d of the jobs, want 299", len(got))
	}
}

// TestRepairSSTableDamage: a damaged sstable block; Repair keeps exactly
// the jobs that could be read from the damaged store.
func TestRepairSSTableDamage(t *testing.T) {
	dir := t.TempDir()
	ids, sst := flushedStore(t, dir, 300)
	fi, _ := os.Stat(sst)
	flipByte(t, sst, fi.Size()/3)
	readable := present(t, dir, ids)
	if len(readable) == len(ids) {
		t.Fatal("the damage hid no job; the test damaged nothing")
	}
	rep := repairAt(t, dir)
	if rep.Jobs != len(readable) || !rep.KeysUnread || !strings.Contains(strings.Join(rep.Damage, "\n"), filepath.Base(sst)) {
		t.Fatalf("report = %+v, want %d jobs and damage naming %s", rep, len(readable), filepath.Base(sst))
	}
	got := present(t, dir, ids)
	if len(got) != len(readable) {
		for _, id := range ids {
			if readable[id] != got[id] {
				t.Logf("%s: readable before %v, after %v", id, readable[id], got[id])
			}
		}
	}
	for id := range readable {
		if !got[id] {
			t.Errorf("job %s was readable before the repair and is gone after it", id)
		}
	}
	if len(got) != len(readable) {
		t.Errorf("repaired store holds %d jobs, %d were readable", len(got), len(readable))
	}
}

// TestRepairBadRecord: a job record failing its checksum is left out and
// reported; every other job, the topic's pause and the seq are kept.
func TestRepairBadRecord(t *testing.T) {
	dir := t.TempDir()
	ids := writeJobs(t, dir, 20)
	s := openAt(t, dir, Options{MinFree: -1})
	until := time.UnixMilli(4_000_000_000_000)
	if err := s.Pause(t.Context(), store.PauseParams{Topic: "crash", Until: until}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	if err := db.Set(jobKey(ids[7]), []byte("\x00\x00\x00\x00garbage"), nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	defer func(n int) { repairBatch = n }(repairBatch)
	repairBatch = 7 // three batches and a rest
	rep := repairAt(t, dir)
	if rep.Jobs != 19 || rep.BadRecords != 1 || rep.Paused != 1 || !strings.Contains(strings.Join(rep.Damage, "\n"), ids[7]) {
		t.Fatalf("report = %+v, want 19 jobs, 1 bad record named, 1 pause", rep)
	}
	s = openAt(t, dir, Options{MinFree: -1})
	defer func() { _ = s.Close() }()
	sts, err := s.Topics(t.Context())
	if err != nil || len(sts) != 1 || !sts[0].PausedUntil.Equal(until) || sts[0].Delayed+sts[0].Ready != 19 {
		t.Fatalf("Topics after repair = %+v, %v; want crash with 19 jobs, paused until %v", sts, err, until)
	}
	j := crashJob("new", false)
	if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil || j.Seq <= 20 {
		t.Fatalf("Put after repair = %v, seq %d; want a seq after the 20 used", err, j.Seq)
	}
}

// TestRepairRefusesOpenStore: Repair takes the lock; a running server's
// store is refused and left alone.
func TestRepairRefusesOpenStore(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1})
	defer func() { _ = s.Close() }()
	_, err := Repair(t.Context(), dir, RepairOptions{})
	if err == nil || !strings.Contains(err.Error(), "running delayq server") {
		t.Fatalf("Repair(open store) = %v, want a refusal naming the running server", err)
	}
	if _, err := Repair(t.Context(), t.TempDir(), RepairOptions{}); err == nil || !strings.Contains(err.Error(), "no delayq store") {
		t.Fatalf("Repair(empty dir) = %v, want a refusal", err)
	}
}

// TestRepairV1Store: a store of the old format is repaired into the new
// one with every job.
func TestRepairV1Store(t *testing.T) {
	dir := copyV1Store(t)
	if rep := repairAt(t, dir); rep.Jobs != 30 || !rep.Clean() {
		t.Fatalf("report = %+v, want 30 jobs and no damage", rep)
	}
	// Repaired once more with progress logged at every step.
	defer func(d time.Duration) { progressEvery = d }(progressEvery)
	progressEvery = 0
	var logs bytes.Buffer
	rep, err := Repair(t.Context(), dir, RepairOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil || rep.Jobs != 30 {
		t.Fatalf("second Repair = %+v, %v", rep, err)
	}
	for _, want := range []string{`msg="repair: reading keys"`, `msg="repair: writing jobs" done=30`, `msg="repair: done" jobs=30`} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("repair log lacks %q:\n%s", want, logs.String())
		}
	}
	s := openAt(t, dir, Options{MinFree: -1})
	defer func() { _ = s.Close() }()
	checkV1Jobs(t, s)
}
