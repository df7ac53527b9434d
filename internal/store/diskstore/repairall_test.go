package diskstore

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq"
)

// Repair never loses an acknowledged job without naming it (issue 28).
//
// TestRepairNamesEveryLoss builds a small real store with several live
// WALs (older ones as a kill -9 under load leaves them: closed, their
// memtables not flushed yet) and several tables, and then, for every WAL
// and table file in turn, cuts it in half or flips one byte in it, runs
// Repair on a copy, and checks that each acknowledged job is either in
// the repaired store or named as lost (by id, in the report and in
// lost-ids.txt, or by a range of seqs or ids), and that the report is
// not clean whenever a job is missing.

// heldFlushes is a filesystem whose new sstables wait while held: the
// memtables then queue up with a WAL each, as under a load that outruns
// the flushes.
type heldFlushes struct {
	vfs.FS
	mu      sync.Mutex
	held    bool
	release chan struct{}
	waiting atomic.Int32
}

func (h *heldFlushes) hold() {
	h.mu.Lock()
	h.held, h.release = true, make(chan struct{})
	h.mu.Unlock()
}

func (h *heldFlushes) open() {
	h.mu.Lock()
	if h.held {
		close(h.release)
		h.held = false
	}
	h.mu.Unlock()
}

func (h *heldFlushes) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	h.mu.Lock()
	held, release := h.held, h.release
	h.mu.Unlock()
	if held && strings.HasSuffix(name, ".sst") {
		h.waiting.Add(1)
		<-release
		h.waiting.Add(-1)
	}
	return h.FS.Create(name, c)
}

// ackedJob is a job the store acknowledged.
type ackedJob struct {
	id  string
	seq uint64
}

// liveWALStore writes a store into dir whose files are as a kill -9 would
// leave them with several WALs live and several tables, and returns its
// acknowledged jobs.
func liveWALStore(t *testing.T, dir string) []ackedJob {
	t.Helper()
	fs := &heldFlushes{FS: vfs.Default}
	s := openAt(t, dir, Options{MinFree: -1, MemTableSize: 64 << 10, fs: fs})
	var acked []ackedJob
	put := func(n int) {
		for range n {
			id := fmt.Sprintf("job-%04d", len(acked))
			j := crashJob(id, len(acked)%3 == 0)
			j.Body = []byte(strings.Repeat("b", 200))
			if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
				t.Fatalf("Put(%s) = %v", id, err)
			}
			acked = append(acked, ackedJob{id, j.Seq})
		}
	}
	// Tables: three flushes.
	for range 3 {
		put(60)
		if err := s.db.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	// Live WALs: flushes held while memtables fill.
	fs.hold()
	for len(walFiles(t, dir)) < 3 {
		put(20)
		if len(acked) > 5000 {
			t.Fatal("no second WAL after 5,000 puts")
		}
	}
	put(30)
	// kill -9 now: copy what the store has written (every put above is
	// acknowledged, so written to the kernel), then let it go.
	snap := dir + ".snap"
	if err := os.CopyFS(snap, os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	fs.open()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(snap, dir); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(filepath.Join(dir, "LOCK"))
	return acked
}

// walFiles lists dir's WAL files, oldest first.
func walFiles(t *testing.T, dir string) []string {
	t.Helper()
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(logs)
	return logs
}

func TestRepairNamesEveryLoss(t *testing.T) {
	src := filepath.Join(t.TempDir(), "src")
	acked := liveWALStore(t, src)
	var files []string
	for _, pat := range []string{"*.log", "*.sst"} {
		m, _ := filepath.Glob(filepath.Join(src, pat))
		files = append(files, m...)
	}
	slices.Sort(files)
	if logs := walFiles(t, src); len(logs) < 2 {
		t.Fatalf("the store has %d WAL files, want several", len(logs))
	}
	t.Logf("%d acknowledged jobs; damaging each of %d files", len(acked), len(files))
	trial := 0
	for _, f := range files {
		for _, how := range []string{"cut", "flip"} {
			trial++
			name := filepath.Base(f)
			t.Run(name+"/"+how, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "data")
				if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
					t.Fatal(err)
				}
				path := filepath.Join(dir, name)
				st, err := os.Stat(path)
				if err != nil {
					t.Fatal(err)
				}
				if how == "cut" {
					if err := os.Truncate(path, st.Size()/2); err != nil {
						t.Fatal(err)
					}
				} else {
					flipByte(t, path, st.Size()/2)
				}
				checkRepairNames(t, dir, acked)
			})
		}
	}
}

// checkRepairNames repairs dir and checks that every job of acked is
// kept or named as lost.
func checkRepairNames(t *testing.T, dir string, acked []ackedJob) {
	t.Helper()
	rep := repairAt(t, dir)
	ids := make([]string, len(acked))
	for i, a := range acked {
		ids[i] = a.id
	}
	kept := present(t, dir, ids)
	lostIDs := map[string]bool{}
	for _, id := range rep.LostIDs {
		lostIDs[id] = true
	}
	if len(rep.LostIDs) > 0 {
		b, err := os.ReadFile(filepath.Join(dir, lostIDsName))
		if err != nil || string(b) != strings.Join(rep.LostIDs, "\n")+"\n" {
			t.Errorf("%s = %q, %v; want the %d lost ids, one a line", lostIDsName, b, err, len(rep.LostIDs))
		}
		if rep.LostIDsFile != filepath.Join(dir, lostIDsName) {
			t.Errorf("LostIDsFile = %q, want %q", rep.LostIDsFile, filepath.Join(dir, lostIDsName))
		}
	}
	missing := 0
	for _, a := range acked {
		if kept[a.id] {
			continue
		}
		missing++
		if !named(rep, a) {
			t.Errorf("job %s (seq %d) is neither in the repaired store nor named as lost; report: %s", a.id, a.seq, reportText(rep))
		}
	}
	if missing > 0 && rep.Clean() {
		t.Errorf("%d acknowledged jobs lost but the report is clean: %s", missing, reportText(rep))
	}
	t.Logf("kept %d of %d, report: %s", len(acked)-missing, len(acked), reportText(rep))
}

// named reports whether rep names a as lost.
func named(rep *RepairReport, a ackedJob) bool {
	if slices.Contains(rep.LostIDs, a.id) {
		return true
	}
	for _, r := range rep.LostSeqRanges {
		if a.seq >= r.From && (r.To == 0 || a.seq <= r.To) {
			return true
		}
	}
	for _, r := range rep.UnreadIDRanges {
		if r.Has(a.id) {
			return true
		}
	}
	return rep.LostSeqs > 0 && a.seq >= rep.LostFromSeq && a.seq <= rep.LostToSeq
}

func reportText(rep *RepairReport) string {
	return fmt.Sprintf("jobs=%d damage=%q lost_ids=%d seq_ranges=%+v id_ranges=%+v lost_commits=%d lost_seqs=%d-%d",
		rep.Jobs, rep.Damage, len(rep.LostIDs), rep.LostSeqRanges, rep.UnreadIDRanges, rep.LostCommits, rep.LostFromSeq, rep.LostToSeq)
}

var _ = time.Second
