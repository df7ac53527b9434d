package diskstore

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/delayq/delayq"
)

// TestDamagedBlockLogsOnce: a flipped byte in a table block that only
// job reads touch. Every read of a job in it fails with ErrCorrupt, but
// the log says so once per block, in one line without a stack trace (the
// trace is at debug level), and Health reports the store degraded, naming
// the damage and `delayq repair`, from the first damaged read on.
func TestDamagedBlockLogsOnce(t *testing.T) {
	dir := t.TempDir()
	ids, sst := flushedStore(t, dir, 300)
	st, _ := os.Stat(sst)
	flipByte(t, sst, st.Size()/3)
	var logs bytes.Buffer
	s := openAt(t, dir, Options{MinFree: -1, Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))})
	defer func() { _ = s.Close() }()
	if h := s.Health(); h != "" {
		t.Fatalf("Health before any damaged read = %q, want well", h)
	}
	bad := 0
	for range 3 {
		for _, id := range ids {
			if _, err := s.Get(t.Context(), delayq.Ref{ID: id}); errors.Is(err, delayq.ErrCorrupt) {
				bad++
			} else if err != nil {
				t.Fatalf("Get(%s) = %v", id, err)
			}
		}
	}
	if bad == 0 {
		t.Fatal("no read met the damage; the test damaged nothing")
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	var damage []string
	for _, l := range lines {
		if strings.Contains(l, "corrupt") || strings.Contains(l, "checksum") {
			damage = append(damage, l)
		}
	}
	if len(damage) != 1 {
		t.Errorf("%d damaged reads logged %d lines about the damage, want 1; the first:\n%.3000s", bad, len(damage), logs.String())
	}
	if len(logs.String()) > 2000 || strings.Contains(logs.String(), ".go:") {
		t.Errorf("the damage log holds a stack trace or is long (%d bytes):\n%.3000s", len(logs.String()), logs.String())
	}
	h := s.Health()
	if !strings.Contains(h, "corrupt") || !strings.Contains(h, "delayq repair") || strings.Contains(h, dir) {
		t.Errorf("Health after damaged reads = %q, want the damage and delayq repair, without the data directory", h)
	}
}
