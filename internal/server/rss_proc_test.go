package server

import (
	"bytes"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/bench"
)

// peakRSS reads a process's peak resident set (VmHWM) in bytes.
func peakRSS(t *testing.T, pid int) int64 {
	t.Helper()
	n := bench.ProcStatusBytes(pid, "VmHWM")
	if n == 0 {
		t.Fatal("no VmHWM in /proc/PID/status")
	}
	return n
}

// TestOversizedBatchesRSSBounded sends 12 batches of 1,000 largest bodies
// (about 66 MB each) at once to the real server. Before request bodies
// were bounded in flight and decoded as a stream, each was read whole
// first: 12 took the process from 42 MiB to 1.9 GiB. Each batch ends in a
// bad entry, so nothing is stored and the peak is the requests' alone; it
// must stay within a few times --max-inflight-bytes, whatever the number
// of requests, and every batch gets a clear answer.
func TestOversizedBatchesRSSBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	const inflight = 64 << 20
	d := buildDaemon(t)
	d.extra = []string{"--max-inflight-bytes", strconv.Itoa(inflight), "--inflight-wait", "100ms"}
	hc := &http.Client{Timeout: time.Minute}
	d.start(hc)
	defer func() {
		if err := d.stop(); err != nil {
			t.Errorf("SIGTERM: %v", err)
		}
	}()

	var b bytes.Buffer
	body := strings.Repeat("x", 65_535)
	b.WriteString(`{"jobs":[`)
	for range 999 {
		fmt.Fprintf(&b, `{"body":%q},`, body)
	}
	b.WriteString(`{"body":"x","delay":"-1s"}]}`)
	batch := b.Bytes()
	base := peakRSS(t, d.cmd.Process.Pid)

	const n = 12
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			res, err := hc.Post(d.url()+"/v1/topics/big/jobs/batch", "application/json", bytes.NewReader(batch))
			if err != nil {
				return // the server may close a connection it refused early
			}
			res.Body.Close()
			codes[i] = res.StatusCode
		})
	}
	wg.Wait()
	peak := peakRSS(t, d.cmd.Process.Pid)
	t.Logf("peak RSS %d MiB (at start %d MiB) for %d batches of %d MB; answers %v", peak>>20, base>>20, n, len(batch)/1e6, codes)
	answered := 0
	for i, c := range codes {
		switch c {
		case 0: // the body was cut off by an early refusal: no answer to check
		case http.StatusBadRequest, http.StatusServiceUnavailable:
			answered++
		default:
			t.Errorf("batch %d answered %d, want 400 (its bad entry) or 503 (bytes in flight)", i, c)
		}
	}
	if answered < n/2 {
		t.Errorf("only %d of %d batches got an answer", answered, n)
	}
	if limit := base + 6*inflight; peak > limit {
		t.Errorf("peak RSS %d MiB, want at most %d MiB (start + 6 × --max-inflight-bytes)", peak>>20, limit>>20)
	}
	var top struct{ Ready int }
	if code, _ := call(t.Context(), hc, "GET", d.url()+"/v1/topics/big", nil, &top); code == http.StatusOK && top.Ready != 0 {
		t.Errorf("%d jobs stored from batches that each held a bad entry", top.Ready)
	}
}
