package diskstore

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// putEach puts n jobs one put (one group commit) at a time.
func putEach(t *testing.T, s *Store, prefix string, n int) []string {
	t.Helper()
	ids := make([]string, n)
	for i := range n {
		ids[i] = fmt.Sprintf("%s%04d", prefix, i)
		if err := s.Put(t.Context(), []*delayq.Job{crashJob(ids[i], i%2 == 1)}); err != nil {
			t.Fatal(err)
		}
	}
	return ids
}

// TestShortLogRefused cuts the newest WAL of a store to half its size,
// at a record boundary and mid-record: both look like a torn tail to the
// WAL check, and before the high-water mark Open served the first half
// without a word. Now Open refuses, naming the WAL and `delayq repair`,
// and changes no file; Repair keeps the jobs the log still holds, counts
// the commits and seqs it lost, and the repaired store never reuses a
// lost seq.
func TestShortLogRefused(t *testing.T) {
	const n = 300
	for _, cut := range []string{"half", "first-record"} {
		t.Run(cut, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			s := openAt(t, dir, Options{MinFree: -1})
			ids := putEach(t, s, "a", n)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			wal := newestWAL(t, dir)
			st, err := os.Stat(wal)
			if err != nil {
				t.Fatal(err)
			}
			size := st.Size() / 2
			if cut == "first-record" {
				size = 5 // inside the first chunk's header: no group left in this WAL
			}
			if err := os.Truncate(wal, size); err != nil {
				t.Fatal(err)
			}
			before := snapshot(t, dir)

			for try := range 2 { // the refusal stands at every start
				_, err = Open(dir, Options{MinFree: -1})
				var ce *CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, delayq.ErrCorrupt) {
					t.Fatalf("start %d: Open(cut log) = %v, want a *CorruptionError", try, err)
				}
				for _, want := range []string{"delayq repair " + dir, ackMarkName, "acknowledged commits are missing"} {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("start %d: Open error lacks %q: %v", try, want, err)
					}
				}
				if cut == "half" {
					if ce.File != wal || !strings.Contains(err.Error(), filepath.Base(wal)) {
						t.Errorf("Open error names %q, want the cut WAL %s", ce.File, wal)
					}
					if try == 0 {
						sameFiles(t, before, dir) // refused before Pebble touched anything
					}
				}
			}

			rep := repairAt(t, dir)
			if rep.LostCommits == 0 || rep.LostSeqs == 0 || rep.LostToSeq != n {
				t.Fatalf("Repair report %+v, want the lost commits and seqs up to %d", rep, n)
			}
			if rep.Jobs+int(rep.LostSeqs) != n || rep.Jobs != int(rep.LostFromSeq)-1 {
				t.Errorf("Repair kept %d jobs and lost seqs %d-%d, want them to add up to %d", rep.Jobs, rep.LostFromSeq, rep.LostToSeq, n)
			}
			// Said once: by LostCommits and LostSeqs (the CLI's "dropped:"
			// line) and the lost seq range, not again among the damage.
			if rep.Clean() || len(rep.LostSeqRanges) != 1 || !strings.Contains(rep.LostSeqRanges[0].Where, "short of its high-water mark") {
				t.Errorf("Repair report %+v does not say the log fell short, once", rep)
			}
			got := present(t, dir, ids)
			if len(got) != rep.Jobs {
				t.Errorf("%d jobs after repair, report says %d kept", len(got), rep.Jobs)
			}
			s = openAt(t, dir, Options{MinFree: -1})
			defer s.Close()
			j := crashJob("after", false)
			if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
				t.Fatal(err)
			}
			if g, err := s.Get(t.Context(), delayq.Ref{ID: "after"}); err != nil || g.Seq <= n {
				t.Errorf("a job put after repair got seq %d (%v), want above every acknowledged seq (%d)", g.Seq, err, n)
			}
		})
	}
}

// TestAckedMarkFollowsCommits: the mark is the last commit, a graceful
// restart passes the check, a store with no mark (one from before it)
// opens and starts one, and a mark that cannot be read is logged and
// does not keep a sound store from starting.
func TestAckedMarkFollowsCommits(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1})
	putEach(t, s, "a", 10)
	if _, err := s.Reserve(t.Context(), store.ReserveParams{Topics: []string{"crash"}, Max: 1, Now: t0}); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	commit, seq := s.commit, s.seq
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := readAckMark(vfs.Default, dir)
	if err != nil || m == nil || m.commit != commit || m.seq != seq || commit < 11 {
		t.Fatalf("ACKED = %+v, %v; want commit %d (at least 11 commits) and seq %d", m, err, commit, seq)
	}
	s = openAt(t, dir, Options{MinFree: -1})
	putEach(t, s, "b", 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	if err := os.Remove(filepath.Join(dir, ackMarkName)); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{MinFree: -1})
	if err := s.Put(t.Context(), []*delayq.Job{crashJob("again", false)}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if m, err := readAckMark(vfs.Default, dir); err != nil || m == nil || m.commit <= commit {
		t.Fatalf("ACKED after a start without one = %+v, %v; want a new mark past commit %d", m, err, commit)
	}

	if err := os.WriteFile(filepath.Join(dir, ackMarkName), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s = openAt(t, dir, Options{MinFree: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer s.Close()
	if !strings.Contains(logs.String(), "cannot read the acknowledged high-water mark") {
		t.Errorf("no warning for an unreadable ACKED; log:\n%s", logs.String())
	}
	if _, err := s.Get(t.Context(), delayq.Ref{ID: "again"}); err != nil {
		t.Errorf("Get after a start with a bad ACKED = %v", err)
	}
}

// TestAckedMarkCountsOnlySynced: with the fsync window a put is answered
// once its WAL write reached the kernel, before its fsync; the mark must
// not count it until the window's loop has synced it, or a power loss
// that lost just the window (as promised) would be refused as damage.
func TestAckedMarkCountsOnlySynced(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1, SyncEvery: time.Hour})
	putEach(t, s, "w", 5)
	if m, err := readAckMark(vfs.Default, dir); err != nil || m != nil {
		t.Fatalf("ACKED before any real sync = %+v, %v; want none: nothing was synced", m, err)
	}
	s.mu.Lock()
	commit := s.commit
	s.mu.Unlock()
	if err := s.Close(); err != nil { // the window's last round syncs, then the mark follows
		t.Fatal(err)
	}
	if m, err := readAckMark(vfs.Default, dir); err != nil || m == nil || m.commit != commit || m.seq != 5 {
		t.Fatalf("ACKED after the closing sync = %+v, %v; want commit %d, seq 5", m, err, commit)
	}
}
