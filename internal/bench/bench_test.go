package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// startBeanstalkd runs a real beanstalkd on a free loopback port. It skips
// when the binary is missing, except under CI where that is a failure.
func startBeanstalkd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("beanstalkd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("beanstalkd is not installed (scripts/deps.sh installs it)")
		}
		t.Skip("beanstalkd not installed; run scripts/deps.sh")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd := exec.Command(bin, "-l", "127.0.0.1", "-p", fmt.Sprint(port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	for i := 0; i < 100; i++ {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return addr
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("beanstalkd did not listen on %s", addr)
	return ""
}

func TestRunAgainstBeanstalkd(t *testing.T) {
	addr := startBeanstalkd(t)
	target := "beanstalk://" + addr
	for _, mode := range []string{ModePut, ModeReserve} {
		t.Run(mode, func(t *testing.T) {
			res, err := Run(t.Context(), Options{Target: target, Mode: mode, N: 300, C: 4, BodySize: 8, Timeout: 30 * time.Second})
			if err != nil {
				t.Fatalf("Run(%s) = %v", mode, err)
			}
			if res.Jobs != 300 || res.PerSec <= 0 || res.P50 <= 0 {
				t.Errorf("Run(%s) = %+v, want 300 jobs with a rate and latencies", mode, res)
			}
			if !strings.Contains(res.Line(), "mode="+mode) {
				t.Errorf("Line() = %q", res.Line())
			}
		})
	}
	t.Run("burst", func(t *testing.T) {
		res, err := Run(t.Context(), Options{Target: target, Mode: ModeBurst, N: 200, C: 4, Lead: 1500 * time.Millisecond, Timeout: 30 * time.Second, PID: os.Getpid()})
		if err != nil {
			t.Fatalf("Run(burst) = %v", err)
		}
		if res.Early != 0 {
			t.Errorf("%d jobs arrived before the time asked for", res.Early)
		}
		if res.Jobs != 200 || res.RSS <= 0 {
			t.Errorf("Run(burst) = %+v, want 200 jobs and an RSS sample", res)
		}
	})
}

func TestOptionsRefused(t *testing.T) {
	tests := []Options{
		{Target: "http://127.0.0.1:1", Mode: ModeReserve, C: 2, Topics: 3, OwnTopic: true},
		{Target: "http://127.0.0.1:1", Mode: ModePut, C: 4, Topics: 2, OwnTopic: true},
		{Target: "http://127.0.0.1:1", Mode: "nope"},
		{Target: "ftp://127.0.0.1:1", Mode: ModePut},
		{Target: "127.0.0.1", Mode: ModePut},
		{Target: "http://127.0.0.1:1", Mode: ModeSpread},
	}
	for _, o := range tests {
		if _, err := Run(context.Background(), o); err == nil {
			t.Errorf("Run(%+v) = nil error, want a refusal", o)
		}
	}
}

func TestStampRoundTrip(t *testing.T) {
	due := time.Unix(1700000000, 123456789)
	b := stamp(make([]byte, 32), due)
	if got := stampTime(b); !got.Equal(due) {
		t.Errorf("stampTime(stamp(%v)) = %v", due, got)
	}
	if got := stampTime([]byte("short")); !got.IsZero() {
		t.Errorf("stampTime(short) = %v, want zero", got)
	}
}

// TestPacedSpread puts during the run, each job due a whole second after it
// is sent, so beanstalkd's whole-second delays carry no rounding: every job
// must arrive, none early, and well within a second of its due time.
func TestPacedSpread(t *testing.T) {
	target := "beanstalk://" + startBeanstalkd(t)
	res, err := Run(t.Context(), Options{Target: target, Mode: ModeSpread, Rate: 200, Duration: time.Second, Delay: time.Second, C: 4, Producers: 2, Timeout: 30 * time.Second})
	if err != nil {
		t.Fatalf("Run(paced spread) = %v", err)
	}
	if res.Jobs != 200 || res.Early != 0 {
		t.Errorf("Run(paced spread) = %+v, want 200 jobs, none early", res)
	}
	// Rounding a pre-put job's delay up to whole seconds made lateness
	// spread over a second; paced jobs ask for exactly their delay.
	if res.P50 >= 500*time.Millisecond {
		t.Errorf("p50 lateness %s: the delay was rounded, not paced", res.P50)
	}
}

// TestOwnTopic: with OwnTopic each consuming connection watches one tube
// of the run, not every one: beanstalkd counts the watch commands
// (cmd-watch), C of them instead of C times Topics, and the run still
// drains every topic.
func TestOwnTopic(t *testing.T) {
	addr := startBeanstalkd(t)
	watches := func() int {
		t.Helper()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.Write([]byte("stats\r\n")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 64<<10)
		got := 0
		for !strings.Contains(string(buf[:got]), "\ncmd-watch:") || !strings.HasSuffix(string(buf[:got]), "\n") {
			n, err := c.Read(buf[got:])
			if err != nil {
				t.Fatal(err)
			}
			got += n
		}
		_, rest, _ := strings.Cut(string(buf[:got]), "\ncmd-watch: ")
		var n int
		fmt.Sscan(rest, &n)
		return n
	}
	for _, own := range []bool{false, true} {
		before := watches()
		res, err := Run(t.Context(), Options{Target: "beanstalk://" + addr, Mode: ModeReserve, N: 60, C: 3, Topics: 3, BodySize: 8,
			OwnTopic: own, Topic: fmt.Sprintf("own-%v", own), Timeout: 30 * time.Second})
		if err != nil {
			t.Fatalf("Run(OwnTopic %v) = %v", own, err)
		}
		if res.Jobs != 60 {
			t.Errorf("Run(OwnTopic %v) did %d jobs, want 60", own, res.Jobs)
		}
		want := 9
		if own {
			want = 3
		}
		if got := watches() - before; got != want {
			t.Errorf("OwnTopic %v: %d watch commands, want %d", own, got, want)
		}
	}
}
