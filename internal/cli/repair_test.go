package cli

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/server"
	"github.com/delayq/delayq/internal/store/diskstore"
)

// damagedStore writes n jobs into a store in a new directory and flips
// one byte in the middle of its newest WAL, inside one job's record.
func damagedStore(t *testing.T, n int) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	s, err := diskstore.Open(dir, diskstore.Options{MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		j := &delayq.Job{ID: fmt.Sprintf("j%03d", i), Topic: "mail", Body: []byte("hello"), State: delayq.StateReady,
			TTR: time.Minute, Due: time.UnixMilli(1_900_000_000_000), Created: time.UnixMilli(1_900_000_000_000)}
		if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	slices.Sort(logs)
	b, err := os.ReadFile(logs[len(logs)-1])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(logs[len(logs)-1], b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestServeRefusesCorruptStoreThenRepair: serve exits 1 naming the
// damaged WAL, its offset and `delayq repair`; repair keeps every job but
// the damaged one and the original; serve then starts on the result.
func TestServeRefusesCorruptStoreThenRepair(t *testing.T) {
	dir := damagedStore(t, 100)
	// Bounded: a serve that starts despite the damage is stopped and the
	// test fails on its exit code.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out, errOut strings.Builder
	code := Main(ctx, []string{"serve", "--data-dir", dir, "--http-addr", "127.0.0.1:0", "--beanstalk-addr", "", "--log-level", "error"}, &out, &errOut)
	if code != exitError || !strings.Contains(errOut.String(), "refusing to start on a corrupt store") ||
		!strings.Contains(errOut.String(), ".log at offset") || !strings.Contains(errOut.String(), "delayq repair "+dir) {
		t.Fatalf("serve on a damaged store: exit %d, stderr %q; want exit 1 naming the WAL, its offset and delayq repair", code, errOut.String())
	}

	code, got, repErr := run(t, "repair", dir)
	if code != exitRepairLost {
		t.Errorf("repair of a store that lost a job: exit %d, stderr %q; want %d (repaired, with losses)", code, repErr, exitRepairLost)
	}
	for _, want := range []string{"repaired " + dir + ": kept 99 jobs", "the original is kept unchanged as " + dir + ".damaged-", "DAMAGE: could not read (1)", ".log bytes", "job seqs"} {
		if !strings.Contains(got, want) {
			t.Errorf("repair printed %q, want %q in it", got, want)
		}
	}
	damaged, _ := filepath.Glob(dir + ".damaged-*")
	if len(damaged) != 1 {
		t.Fatalf("kept originals: %v, want one", damaged)
	}

	cfg := config.Default()
	cfg.HTTPAddr, cfg.BeanstalkAddr, cfg.DataDir = "127.0.0.1:0", "", dir
	srv := server.New(cfg, nil)
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start on the repaired store = %v", err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	topics := mustRun(t, "topics", "--server", "http://"+srv.Addr().String())
	if !strings.Contains(topics, "mail") || !strings.Contains(topics, "99") {
		t.Errorf("topics after repair: %q, want mail with 99 ready", topics)
	}

	// A repair of a running server's store is refused.
	if code, _, errOut := run(t, "repair", dir); code == 0 || !strings.Contains(errOut, "running delayq server") {
		t.Errorf("repair of a served store: exit %d, stderr %q; want a refusal", code, errOut)
	}
}

// TestRepairNamesLostJobs: jobs whose records fail their checksum are
// named once each: the summary shows the first ids and where the whole
// list is (lost-ids.txt in the repaired directory), and repair exits 3.
func TestRepairNamesLostJobs(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	s, err := diskstore.Open(dir, diskstore.Options{MinFree: -1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 40 {
		j := &delayq.Job{ID: fmt.Sprintf("j%03d", i), Topic: "mail", Body: []byte("hello"), State: delayq.StateReady,
			TTR: time.Minute, Due: time.UnixMilli(1_900_000_000_000), Created: time.UnixMilli(1_900_000_000_000)}
		if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var lost []string
	for i := range 25 {
		id := fmt.Sprintf("j%03d", i)
		lost = append(lost, id)
		if err := db.Set([]byte("J"+id), []byte("\x00\x00\x00\x00garbage"), pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := run(t, "repair", dir)
	if code != exitRepairLost {
		t.Fatalf("repair: exit %d, stderr %q; want %d", code, errOut, exitRepairLost)
	}
	file := filepath.Join(dir, "lost-ids.txt")
	want := "lost: 25 jobs by id, all listed in " + file + ": " + strings.Join(lost[:20], " ") + " … and 5 more"
	if !strings.Contains(out, want) {
		t.Errorf("repair printed:\n%s\nwant the line %q", out, want)
	}
	if n := strings.Count(out, "j003"); n != 2 { // its damage line and the lost line
		t.Errorf("repair named j003 %d times, want twice (its damaged record, the lost list):\n%s", n, out)
	}
	b, err := os.ReadFile(file)
	if err != nil || string(b) != strings.Join(lost, "\n")+"\n" {
		t.Errorf("%s = %q, %v; want the 25 ids, one a line", file, b, err)
	}
}
