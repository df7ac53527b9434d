package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/store/diskstore"
)

// TestHealthzDegradedOnDamage: a table with one flipped byte in a block
// that only job reads touch. The server starts; once a read meets the
// damage (503 to the client), /healthz answers degraded, naming the
// corrupt data and delayq repair, instead of ok until a list call fails.
func TestHealthzDegradedOnDamage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	var ids []string
	for round := range 2 { // the second open flushes the first one's log into a table
		s, err := diskstore.Open(dir, diskstore.Options{MinFree: -1})
		if err != nil {
			t.Fatal(err)
		}
		for i := range 300 * (1 - round) {
			id := fmt.Sprintf("job-%04d", i)
			ids = append(ids, id)
			now := time.UnixMilli(1_900_000_000_000)
			j := &delayq.Job{ID: id, Topic: "mail", Body: []byte("hello"), State: delayq.StateDelayed, TTR: time.Minute, Due: now.Add(time.Hour), Created: now}
			if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	ssts, _ := filepath.Glob(filepath.Join(dir, "*.sst"))
	if len(ssts) != 1 {
		t.Fatalf("tables: %v, want one", ssts)
	}
	b, err := os.ReadFile(ssts[0])
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/3] ^= 0xff
	if err := os.WriteFile(ssts[0], b, 0o644); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.HTTPAddr, cfg.BeanstalkAddr, cfg.DataDir, cfg.MinFreeMiB = "127.0.0.1:0", "", dir, 0
	srv := New(cfg, nil)
	if err := srv.Start(t.Context()); err != nil {
		t.Fatalf("Start = %v", err)
	}
	defer func() { _ = srv.Shutdown(context.Background()) }()
	base := "http://" + srv.Addr().String()
	health := func() (status, reason string) {
		resp, err := http.Get(base + "/healthz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var h struct{ Status, Reason string }
		if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
			t.Fatal(err)
		}
		return h.Status, h.Reason
	}
	if st, reason := health(); st != "ok" {
		t.Fatalf("/healthz before any damaged read = %s %q, want ok", st, reason)
	}
	failed := 0
	for _, id := range ids {
		resp, err := http.Get(base + "/v1/jobs/" + id)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusServiceUnavailable {
			failed++
		}
	}
	if failed == 0 {
		t.Fatal("no read met the damage; the test damaged nothing")
	}
	st, reason := health()
	if st != "degraded" || !strings.Contains(reason, "corrupt data") || !strings.Contains(reason, "delayq repair") || strings.Contains(reason, dir) {
		t.Errorf("/healthz after %d reads met damage = %s %q, want degraded naming the corrupt data and delayq repair, not the data directory", failed, st, reason)
	}
}
