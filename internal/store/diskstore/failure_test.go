package diskstore

import (
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/delayq/delayq"
)

// TestSyncFailureFailsStore makes the WAL fsync fail and checks that the
// put reports ErrUnavailable and every later call is refused, since memory
// may now be ahead of the disk.
func TestSyncFailureFailsStore(t *testing.T) {
	var failSync atomic.Bool
	fs := failingWALSyncs(&failSync)
	s := openAt(t, t.TempDir(), Options{fs: fs})
	defer func() { _ = s.Close() }()
	ctx := t.Context()
	if err := s.Put(ctx, []*delayq.Job{crashJob("before", false)}); err != nil {
		t.Fatalf("Put(before) = %v, want nil", err)
	}
	failSync.Store(true)
	err := s.Put(ctx, []*delayq.Job{crashJob("lost", false)})
	if !errors.Is(err, delayq.ErrUnavailable) {
		t.Fatalf("Put with failing fsync = %v, want an error wrapping ErrUnavailable", err)
	}
	failSync.Store(false)
	if _, err := s.Get(ctx, delayq.Ref{ID: "before"}); !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("Get after a failed sync = %v, want ErrUnavailable", err)
	}
	if err := s.Put(ctx, []*delayq.Job{crashJob("after", false)}); !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("Put after a failed sync = %v, want ErrUnavailable", err)
	}
}

// TestOpenRefusesUnknownVersion checks that a store written with another
// format version is refused with a message naming it.
func TestOpenRefusesUnknownVersion(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{l: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Set(metaVersionKey, []byte{0, 0, 0, 99}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = Open(dir, Options{})
	if err == nil || !strings.Contains(err.Error(), "format version") {
		t.Fatalf("Open(store of version 99) = %v, want a format version error", err)
	}
}

// failingWALSyncs is the real filesystem, where every sync of a WAL file
// fails while fail is set.
func failingWALSyncs(fail *atomic.Bool) vfs.FS {
	return errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if fail.Load() && strings.HasSuffix(op.Path, ".log") &&
			(op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			return errorfs.ErrInjected
		}
		return nil
	}))
}
