package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestCorruptStoreBinary runs the real binary on a store whose newest WAL
// has one flipped byte: serve exits 1 naming the file, the offset and
// `delayq repair`, without serving; `delayq repair` keeps every job but
// the damaged one and the original directory; serve then starts on the
// result with those jobs.
func TestCorruptStoreBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	d := buildDaemon(t)
	d.start(hc)
	const n = 60
	for i := range n {
		if _, err := call(t.Context(), hc, "POST", d.url()+"/v1/topics/mail/jobs", map[string]any{"id": fmt.Sprintf("m%02d", i), "body": "hello"}, nil); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	if err := d.stop(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}

	logs, _ := filepath.Glob(filepath.Join(d.dir, "*.log"))
	slices.Sort(logs)
	wal := logs[len(logs)-1]
	b, err := os.ReadFile(wal)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(wal, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// A serve that starts anyway would run until the timeout, exit on
	// the signal, and fail the exit-code check.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	serve := exec.CommandContext(ctx, d.bin, "serve", "--http-addr", freeAddr(t), "--beanstalk-addr", "", "--data-dir", d.dir)
	out, err := serve.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("serve on a damaged WAL: %v, want exit status 1; output:\n%s", err, out)
	}
	for _, want := range []string{"refusing to start on a corrupt store", filepath.Base(wal) + " at offset", "delayq repair " + d.dir} {
		if !strings.Contains(string(out), want) {
			t.Errorf("serve output lacks %q:\n%s", want, out)
		}
	}

	out, err = exec.CommandContext(t.Context(), d.bin, "repair", d.dir).Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 || !strings.Contains(string(out), fmt.Sprintf("kept %d jobs", n-1)) {
		t.Fatalf("repair: %v, output %q; want %d jobs kept and exit status 3 (one acknowledged job lost)", err, out, n-1)
	}
	if kept, _ := filepath.Glob(d.dir + ".damaged-*"); len(kept) != 1 {
		t.Fatalf("originals kept: %v, want one", kept)
	}

	d.start(hc)
	defer func() { _ = d.stop() }()
	var topic struct{ Ready int }
	if _, err := call(t.Context(), hc, "GET", d.url()+"/v1/topics/mail", nil, &topic); err != nil || topic.Ready != n-1 {
		t.Fatalf("GET /v1/topics/mail after repair = %+v, %v; want %d ready", topic, err, n-1)
	}
}
