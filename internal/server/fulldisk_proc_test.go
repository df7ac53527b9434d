package server

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// mountTmpfs mounts a tmpfs of size MiB in a temp dir, or skips the test
// where mounting is not allowed (not root, or a container without the
// capability).
func mountTmpfs(t *testing.T, mib int) string {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%dm", mib), "tmpfs", dir).CombinedOutput()
	if err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); the full-disk restart test needs one", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// fill writes zeros to path until the filesystem is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

// TestRestartOnFullDisk kills the real server, fills its filesystem to the
// last byte and starts it again. Before the read-only start, Pebble's
// opening flush failed and retried forever: no listener, SIGTERM
// unanswered. Now it serves reads, refuses puts as disk_full with no file
// path, says why in /healthz, answers SIGTERM, and takes writes again by
// itself once space is freed.
func TestRestartOnFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	mnt := mountTmpfs(t, 48)
	d := buildDaemon(t)
	d.dir = filepath.Join(mnt, "data")
	d.extra = []string{"--min-free-mib", "0", "--ballast-mib", "0"} // the floor and ballast off: the disk really fills
	hc := &http.Client{Timeout: 10 * time.Second}
	ctx := t.Context()
	d.start(hc)
	for i := range 20 {
		in := api.PutRequest{ID: fmt.Sprintf("j%d", i), Body: ptrTo("x")}
		if i%2 == 1 {
			in.Delay = ptrTo(api.Duration(time.Hour))
		}
		if code, err := call(ctx, hc, "POST", d.url()+"/v1/topics/t/jobs", in, nil); code != http.StatusCreated {
			t.Fatalf("put %s = %d %v", in.ID, code, err)
		}
	}
	d.kill()
	fill(t, filepath.Join(mnt, "fill"))

	type health struct{ Status, Reason string }
	checkReadOnly := func() {
		t.Helper()
		var h health
		if code, err := call(ctx, hc, "GET", d.url()+"/healthz", nil, &h); code != http.StatusOK || h.Status != "degraded" ||
			!strings.Contains(h.Reason, "reads only") || strings.Contains(h.Reason, mnt) {
			t.Errorf("/healthz on a full disk = %d %+v %v, want degraded, saying reads only, naming no path", code, h, err)
		}
		var top api.Topic
		if code, err := call(ctx, hc, "GET", d.url()+"/v1/topics/t", nil, &top); code != http.StatusOK || top.Ready != 10 || top.Delayed != 10 {
			t.Errorf("GET /v1/topics/t on a full disk = %d %+v %v, want 10 ready and 10 delayed", code, top, err)
		}
		var j api.Job
		if code, err := call(ctx, hc, "GET", d.url()+"/v1/jobs/j3", nil, &j); code != http.StatusOK || j.State != "delayed" {
			t.Errorf("GET /v1/jobs/j3 on a full disk = %d %+v %v", code, j, err)
		}
		code, err := call(ctx, hc, "POST", d.url()+"/v1/topics/t/jobs", api.PutRequest{Body: ptrTo("y")}, nil)
		if code != http.StatusInsufficientStorage || err == nil || strings.Contains(err.Error(), mnt) || !strings.Contains(err.Error(), "disk_full") {
			t.Errorf("put on a full disk = %d %v, want 507 disk_full naming no path", code, err)
		}
	}

	d.start(hc) // fails the test if no listener answers within 15 s
	checkReadOnly()
	if err := d.stop(); err != nil {
		t.Fatalf("SIGTERM to a server started on a full disk: %v\n%s", err, d.logTail())
	}

	d.start(hc)
	checkReadOnly()
	if err := os.Remove(filepath.Join(mnt, "fill")); err != nil {
		t.Fatal(err)
	}
	var h health
	for deadline := time.Now().Add(15 * time.Second); ; {
		if code, _ := call(ctx, hc, "GET", d.url()+"/healthz", nil, &h); code == http.StatusOK && h.Status == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/healthz = %+v 15 s after space was freed, want ok\n%s", h, d.logTail())
		}
		time.Sleep(50 * time.Millisecond) // polling an observable state: the store's watcher reopens it
	}
	if code, err := call(ctx, hc, "POST", d.url()+"/v1/topics/t/jobs", api.PutRequest{ID: "after", Body: ptrTo("z")}, nil); code != http.StatusCreated {
		t.Errorf("put after space was freed = %d %v, want 201", code, err)
	}
	var r api.JobsResponse
	if code, err := call(ctx, hc, "POST", d.url()+"/v1/reserve", api.ReserveRequest{Topics: []string{"t"}, N: 100}, &r); code != http.StatusOK || len(r.Jobs) != 11 {
		t.Errorf("reserve after space was freed = %d, %d jobs, %v; want the 10 ready jobs and the new one", code, len(r.Jobs), err)
	}
	if err := d.stop(); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
}
