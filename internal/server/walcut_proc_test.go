package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// TestCutWALBinary: 3,000 acknowledged puts to the real binary, kill -9,
// the newest WAL cut to half its size. The cut looks like the torn tail
// of a crash, and before the acknowledged high-water mark the server
// started on it with no word and about a fifth of the jobs gone. Now
// serve exits 1 naming the cut file and `delayq repair`, without
// serving; repair keeps what the log still holds and says how many
// acknowledged jobs it lost, the two adding up to 3,000; serve then starts
// on the result with exactly the jobs kept.
func TestCutWALBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	t.Cleanup(hc.CloseIdleConnections)
	d := buildDaemon(t)
	d.start(hc)
	const n, workers = 3000, 8
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				in := api.PutRequest{ID: fmt.Sprintf("j%04d", i), Body: ptrTo("hello")}
				if _, err := call(t.Context(), hc, "POST", d.url()+"/v1/topics/t/jobs", in, nil); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("put: %v", err)
	}
	d.kill()

	logs, _ := filepath.Glob(filepath.Join(d.dir, "*.log"))
	slices.Sort(logs)
	wal := logs[len(logs)-1]
	st, err := os.Stat(wal)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(wal, st.Size()/2); err != nil {
		t.Fatal(err)
	}
	t.Logf("cut %s from %d to %d bytes", filepath.Base(wal), st.Size(), st.Size()/2)

	// A serve that starts anyway runs until the timeout and fails the
	// exit-code check.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, d.bin, "serve", "--http-addr", freeAddr(t), "--beanstalk-addr", "", "--data-dir", d.dir).CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("serve on a cut WAL: %v, want exit status 1 (a refusal); output:\n%s", err, out)
	}
	for _, want := range []string{"refusing to start on a corrupt store", filepath.Base(wal), "acknowledged commits are missing", "delayq repair " + d.dir} {
		if !strings.Contains(string(out), want) {
			t.Errorf("serve output lacks %q:\n%s", want, out)
		}
	}

	out, err = exec.CommandContext(t.Context(), d.bin, "repair", d.dir).Output()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 3 {
		t.Fatalf("repair: %v, want exit status 3 (repaired, acknowledged jobs lost)\n%s", err, out)
	}
	t.Logf("repair said:\n%s", out)
	kept := regexp.MustCompile(`kept (\d+) jobs`).FindSubmatch(out)
	lost := regexp.MustCompile(`dropped: \d+ commits? the store had acknowledged are missing from its log \(it was cut short\); up to (\d+) jobs put in them \(seqs (\d+)-3000\) are lost`).FindSubmatch(out)
	if kept == nil || lost == nil {
		t.Fatalf("repair output does not say what it kept and what it dropped:\n%s", out)
	}
	k, _ := strconv.Atoi(string(kept[1]))
	l, _ := strconv.Atoi(string(lost[1]))
	if k+l != n || k == 0 || l == 0 {
		t.Errorf("repair kept %d and lost %d jobs, want both above 0 and adding up to %d", k, l, n)
	}

	d.start(hc)
	defer func() { _ = d.stop() }()
	var topic api.Topic
	if _, err := call(t.Context(), hc, "GET", d.url()+"/v1/topics/t", nil, &topic); err != nil || topic.Ready != k {
		t.Fatalf("GET /v1/topics/t after repair = %+v, %v; want the %d jobs kept", topic, err, k)
	}
	var put api.PutResponse
	if _, err := call(t.Context(), hc, "POST", d.url()+"/v1/topics/t/jobs", api.PutRequest{ID: "after", Body: ptrTo("x")}, &put); err != nil {
		t.Fatalf("put after repair: %v", err)
	}
	if put.Seq <= n {
		t.Errorf("a put after repair got seq %d, want above every acknowledged one (%d): a lost job's seq must not be reused", put.Seq, n)
	}
}
