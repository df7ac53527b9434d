package redisstore

import (
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// startRedis runs a private redis-server on port (0: a free one), so the
// test may kill and restart it.
func startRedis(t *testing.T, port int, args ...string) (*exec.Cmd, int) {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		redisAddrs(t, "DELAYQ_TEST_REDIS") // skips (or fails in CI) the same way
		t.Skip("redis-server is not installed")
	}
	if port == 0 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port = l.Addr().(*net.TCPAddr).Port
		l.Close()
	}
	cmd := exec.Command(bin, append([]string{"--bind", "127.0.0.1", "--port", fmt.Sprint(port), "--save", "", "--appendonly", "no", "--dir", t.TempDir()}, args...)...)
	if err := cmd.Start(); err != nil {
		t.Fatalf("start redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 100 {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			c.Close()
			return cmd, port
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("redis-server on port %d did not start", port)
	return nil, 0
}

func TestNewFailsClearlyWithoutRedis(t *testing.T) {
	_, port := startRedis(t, 0)
	addr := fmt.Sprintf("127.0.0.1:%d", port+1) // nothing listens there (almost surely)
	start := time.Now()
	_, err := New(t.Context(), Options{Addrs: []string{addr}})
	if !errors.Is(err, delayq.ErrUnavailable) || !strings.Contains(err.Error(), addr) {
		t.Errorf("New(%s) = %v, want an error wrapping ErrUnavailable that names the address", addr, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("New(%s) took %s to fail, want at most 5s", addr, d)
	}
	if _, err := New(t.Context(), Options{URL: "http://" + addr}); err == nil || !strings.Contains(err.Error(), "scheme") {
		t.Errorf("New(http:// url) = %v, want a bad-scheme error", err)
	}
}

// TestFailsFastAndRecoversWhenRedisReturns: while Redis is away calls
// fail fast and Health says so (/readyz answers 503); once it is back
// they succeed and Health is "" again. The Redis persists nothing, so its
// restart loses every key, the seq counter too: seqs still never repeat.
func TestFailsFastAndRecoversWhenRedisReturns(t *testing.T) {
	cmd, port := startRedis(t, 0)
	s := openStore(t, []string{fmt.Sprintf("127.0.0.1:%d", port)}, Options{Volatile: true, LeaseTTL: 600 * time.Millisecond})
	defer s.Close()
	if h := s.Health(); h != "" {
		t.Fatalf("Health() before the outage = %q, want \"\"", h)
	}
	if _, err := s.Notify(t.Context()); err != nil {
		t.Fatalf("Notify() = %v", err)
	}
	waitFor(t, 5*time.Second, "listening for events", s.Listening)
	put := func(id string) error {
		now := delayq.TruncMilli(time.Now())
		return s.Put(t.Context(), []*delayq.Job{{ID: id, Topic: "outage", TTR: time.Second, State: delayq.StateReady, Due: now, Created: now}})
	}
	if err := put("before"); err != nil {
		t.Fatalf("Put before the outage = %v", err)
	}
	before, err := s.Get(t.Context(), delayq.Ref{ID: "before"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	start := time.Now()
	if err := put("during"); !errors.Is(err, delayq.ErrUnavailable) || !strings.Contains(err.Error(), "redis") {
		t.Errorf("Put during the outage = %v, want ErrUnavailable naming redis", err)
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("Put during the outage took %s to fail, want fast (under 4s)", d)
	}
	waitFor(t, 5*time.Second, "the subscription seen lost", func() bool { return !s.Listening() })
	waitFor(t, 5*time.Second, "Health saying redis is unreachable", func() bool { return strings.Contains(s.Health(), "redis") })
	startRedis(t, port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		id := fmt.Sprintf("after-%d", time.Now().UnixNano())
		err := put(id)
		if err == nil {
			after, err := s.Get(t.Context(), delayq.Ref{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			if after.Seq <= before.Seq {
				t.Errorf("seq after Redis lost every key = %d, want above %d, the seq before: seqs must never repeat", after.Seq, before.Seq)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Put after Redis returned = %v, still failing after 10s", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitFor(t, 5*time.Second, "leases taken again after the outage", func() bool { return len(s.Buckets()) == s.opt.Buckets })
	waitFor(t, 5*time.Second, "subscribed again after the outage", s.Listening)
	waitFor(t, 5*time.Second, "Health well again", func() bool { return s.Health() == "" })
}
