package diskstore

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// TestBackupWhileServing backs up a store whose last put is still in its
// open group, extracts the archive by hand, and opens both the copy and
// the original again: each holds every job, and the data directory keeps
// no leftover checkpoint.
func TestBackupWhileServing(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 50 {
		j := &delayq.Job{ID: string(rune('a'+i%26)) + time.Duration(i).String(), Topic: "t", Body: []byte("x"),
			TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
		if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := s.Backup(ctx, &buf); err != nil {
		t.Fatalf("Backup() = %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(filepath.Join(dir, checkpointDir)); len(left) != 0 {
		t.Errorf("checkpoints left in the data directory: %v", left)
	}

	copyDir := t.TempDir()
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(copyDir, h.Name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{dir, copyDir} {
		s := openAt(t, d, Options{})
		ts, err := s.Topics(ctx)
		if err != nil || len(ts) != 1 || ts[0].Ready != 50 {
			t.Errorf("store in %s holds %+v, %v; want 50 ready jobs in t", d, ts, err)
		}
		s.Close()
	}
}
