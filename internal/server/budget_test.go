package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// waitBudget polls cond (observable server state) until it holds, failing
// the test with what it last saw after d.
func waitBudget(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after %v", what, saw, d)
		}
		time.Sleep(time.Millisecond)
	}
}

// Issue 18 item 2: three connections that each declare a third of
// --max-inflight-bytes and send their body a byte at a time hold only the
// bytes they sent, so a put, a reserve and a finish on other connections
// are answered at once (on the build that charged the declared
// Content-Length up front they all waited out --inflight-wait and
// answered 503 too_many_bytes_in_flight).
func TestSlowSendersDoNotStarveWriters(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	const max = 3 << 20
	cfg.MaxInflightBytes = max
	cfg.InflightWait = time.Second // the old build's 503 came after this
	s := startServer(t, cfg, &syncBuffer{})
	budget := s.sec.bytes
	hc := plainClient(t)

	// The slow senders: real sockets, a declared third of the budget each.
	var slow []net.Conn
	sent := int64(0)
	for i := range 3 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		fmt.Fprintf(c, "POST /v1/topics/slow%d/jobs/batch HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"jobs\":[", i, max/3)
		sent += int64(len(`{"jobs":[`))
		slow = append(slow, c)
	}
	// trickle sends one more byte on every slow connection and waits
	// until the server has charged exactly what they sent: what arrived
	// is in memory, what was only declared is not.
	charged := func() (bool, string) {
		n := budget.InFlight()
		return n == sent, fmt.Sprintf("%d bytes charged (sent %d, declared %d)", n, sent, max)
	}
	trickle := func() {
		t.Helper()
		for _, c := range slow {
			if _, err := io.WriteString(c, " "); err != nil {
				t.Fatalf("a slow sender was cut off: %v", err)
			}
			sent++
		}
		waitBudget(t, 10*time.Second, "the slow senders' bytes", charged)
	}
	// Until the server has read what they sent (on the old build it had
	// charged what they declared by then).
	waitBudget(t, 10*time.Second, "the slow senders' bytes", func() (bool, string) {
		n := budget.InFlight()
		return n >= sent, fmt.Sprintf("%d bytes charged (sent %d)", n, sent)
	})

	timed := func(what string, f func() (int, string)) {
		t.Helper()
		start := time.Now()
		status, code := f()
		took := time.Since(start)
		t.Logf("%s while 3 senders trickle: %d %s in %v", what, status, code, took)
		if status != http.StatusOK && status != http.StatusCreated {
			t.Fatalf("%s while slow senders trickle: %d %s after %v", what, status, code, took)
		}
	}
	timed("put", func() (int, string) {
		return secCall(t, hc, "POST", s.URL()+"/v1/topics/fast/jobs", "", "", `{"id":"fast-1","body":"hello"}`)
	})
	trickle()
	var reserved api.JobsResponse
	timed("reserve", func() (int, string) {
		req, _ := http.NewRequest("POST", s.URL()+"/v1/reserve", strings.NewReader(`{"topics":["fast"]}`))
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(b, &reserved); err != nil || len(reserved.Jobs) != 1 {
			t.Fatalf("reserve answered %d %s", resp.StatusCode, b)
		}
		return resp.StatusCode, ""
	})
	trickle()
	timed("finish", func() (int, string) {
		return secCall(t, hc, "POST", s.URL()+"/v1/jobs/fast-1/finish", "", "",
			fmt.Sprintf(`{"reservation":%q}`, reserved.Jobs[0].Reservation))
	})
	trickle()
	if n := budget.Refused(); n != 0 {
		t.Errorf("%d takes refused; nobody needed to be", n)
	}
	for _, c := range slow {
		c.Close()
	}
	waitBudget(t, 10*time.Second, "bytes charged after the slow senders left", func() (bool, string) {
		n := budget.InFlight()
		return n == 0, fmt.Sprintf("%d bytes", n)
	})
	resp, err := hc.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	m, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"\ndelayq_http_inflight_bytes 0\n", "\ndelayq_http_inflight_bytes_peak ", "\ndelayq_http_inflight_refused_total 0\n"} {
		if !strings.Contains(string(m), want) {
			t.Errorf("/metrics has no %q", strings.TrimSpace(want))
		}
	}
}

// Issue 18 item 9: a batch put is charged what it decodes into, not only
// its wire bytes: the decoded bodies and the copies the store makes on
// the way in (httpapi.putCopies, five in all; docs/benchmarks.md has the
// heap profile). Charged the wire bytes alone, 12 concurrent maximal
// batches held 1.2 GB under a 256 MiB budget.
func TestBatchPutChargesWhatItDecodes(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxInflightBytes = 64 << 20
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	const jobs, size = 30, 60_000
	body := strings.Repeat("x", size)
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range jobs {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"body":%q}`, body)
	}
	sb.WriteString(`]}`)
	if status, code := secCall(t, hc, "POST", s.URL()+"/v1/topics/t/jobs/batch", "", "", sb.String()); status != 201 {
		t.Fatalf("batch put: %d %s", status, code)
	}
	want := int64(sb.Len()) + 5*jobs*size
	if peak := s.sec.bytes.Peak(); peak < want {
		t.Errorf("a batch of %d wire bytes and %d body bytes was charged at most %d, want at least %d (wire + 5 copies of the bodies)",
			sb.Len(), jobs*size, peak, want)
	}
	if n := s.sec.bytes.InFlight(); n != 0 {
		t.Errorf("%d bytes still charged after the answer", n)
	}
}
