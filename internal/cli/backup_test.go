package cli

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/store/diskstore"
)

// TestBackupRestores takes a backup of a serving store with jobs in
// several states, opens the backup as a data directory, and finds the same
// jobs; a second backup into the same, now full, directory is refused.
func TestBackupRestores(t *testing.T) {
	srv := startServer(t)
	for _, id := range []string{"a1", "a2", "a3"} {
		mustRun(t, "put", "--server", srv, "mail", "hello "+id, "--id", id)
	}
	mustRun(t, "put", "--server", srv, "mail", "later", "--id", "d1", "--delay", "1h")
	mustRun(t, "put", "--server", srv, "sms", "text", "--id", "s1")
	mustRun(t, "reserve", "--server", srv, "sms")

	dir := filepath.Join(t.TempDir(), "backup")
	out := mustRun(t, "backup", "--server", srv, dir)
	if !strings.HasPrefix(out, "backup written to "+dir) {
		t.Fatalf("backup printed %q", out)
	}

	s, err := diskstore.Open(dir, diskstore.Options{})
	if err != nil {
		t.Fatalf("opening the backup: %v", err)
	}
	defer s.Close()
	ts, err := s.Topics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][4]int{}
	for _, tp := range ts {
		got[tp.Name] = [4]int{tp.Ready, tp.Delayed, tp.Reserved, tp.Buried}
	}
	want := map[string][4]int{"mail": {3, 1, 0, 0}, "sms": {0, 0, 1, 0}}
	if len(got) != len(want) || got["mail"] != want["mail"] || got["sms"] != want["sms"] {
		t.Fatalf("backup holds %v (ready, delayed, reserved, buried), want %v", got, want)
	}

	code, _, errOut := run(t, "backup", "--server", srv, dir)
	if code == 0 || !strings.Contains(errOut, "not empty") {
		t.Fatalf("backup into a full directory: exit %d, stderr %q; want a refusal", code, errOut)
	}
	if entries, _ := os.ReadDir(filepath.Join(dir)); len(entries) == 0 {
		t.Fatal("the refused backup emptied the directory")
	}
}

// TestBackupOfRedisServerRefusedClearly: a server on Redis has no store
// of its own to copy; `delayq backup` is refused with not_supported (501)
// and words that say to back up Redis, and writes nothing.
func TestBackupOfRedisServerRefusedClearly(t *testing.T) {
	addr := os.Getenv("DELAYQ_TEST_REDIS")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DELAYQ_TEST_REDIS is not set; scripts/test.sh starts a Redis for the tests")
		}
		t.Skip("DELAYQ_TEST_REDIS not set; run scripts/test.sh or scripts/redis-test-env.sh")
	}
	srv := startServer(t, func(c *config.Config) {
		c.Redis = "redis://" + addr + "/11"
		c.RedisPrefix = "backup-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	})
	resp, err := http.Get(srv + "/v1/backup")
	if err != nil {
		t.Fatal(err)
	}
	var e api.ErrorResponse
	err = json.NewDecoder(resp.Body).Decode(&e)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusNotImplemented || e.Error.Code != "not_supported" ||
		e.Error.Message != "this server's store is Redis: back up Redis itself (docs/redis.md)" {
		t.Errorf("GET /v1/backup of a Redis-backed server = %d %+v (%v), want 501 not_supported saying to back up Redis", resp.StatusCode, e, err)
	}
	dir := filepath.Join(t.TempDir(), "backup")
	code, _, errOut := run(t, "backup", "--server", srv, dir)
	if code == 0 || !strings.Contains(errOut, "this server's store is Redis: back up Redis itself (docs/redis.md)") {
		t.Errorf("delayq backup of a Redis-backed server: exit %d, stderr %q; want the refusal saying to back up Redis", code, errOut)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("the refused backup wrote %d entries into %s", len(entries), dir)
	}
}
