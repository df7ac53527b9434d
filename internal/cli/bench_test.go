package cli

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/server"
)

// TestBenchBothProtocols runs small bounded benches against one in-process
// server over HTTP and over the beanstalkd protocol.
func TestBenchBothProtocols(t *testing.T) {
	cfg := config.Default()
	cfg.HTTPAddr, cfg.BeanstalkAddr, cfg.DataDir = "127.0.0.1:0", "127.0.0.1:0", t.TempDir()
	s := server.New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() {
		http.DefaultClient.CloseIdleConnections()
		s.Shutdown(context.Background())
	})
	targets := map[string]string{"http": s.URL(), "beanstalk": "beanstalk://" + s.BeanstalkAddr().String()}
	for proto, target := range targets {
		for _, mode := range []string{"put", "reserve", "burst"} {
			t.Run(proto+"/"+mode, func(t *testing.T) {
				code, out, errOut := run(t, "bench", target, "--mode", mode, "-n", "200", "-c", "4", "--lead", "2s", "--timeout", "60s")
				if code != 0 {
					t.Fatalf("bench exited %d: %s", code, errOut)
				}
				for _, want := range []string{"proto=" + proto, "mode=" + mode, "n=200", "throughput"} {
					if !strings.Contains(out, want) {
						t.Errorf("bench output lacks %q:\n%s", want, out)
					}
				}
				if mode == "burst" && !strings.Contains(out, "early=0") {
					t.Errorf("jobs arrived early:\n%s", out)
				}
			})
		}
	}
	if code, _, errOut := run(t, "bench", targets["beanstalk"], "--batch", "10"); code != exitUsage || !strings.Contains(errOut, "only over HTTP") {
		t.Errorf("bench --batch over beanstalk = %d %q, want a usage error", code, errOut)
	}
	if code, _, errOut := run(t, "bench", targets["beanstalk"], "--take", "10"); code != exitUsage || !strings.Contains(errOut, "only over HTTP") {
		t.Errorf("bench --take over beanstalk = %d %q, want a usage error", code, errOut)
	}
	t.Run("spread/paced", func(t *testing.T) {
		for proto, target := range targets {
			code, out, errOut := run(t, "bench", target, "--mode", "spread", "--rate", "200", "--duration", "1s", "--delay", "1s", "--producers", "2", "-c", "4", "--timeout", "60s", "--line")
			if code != 0 {
				t.Fatalf("%s: bench exited %d: %s", proto, code, errOut)
			}
			for _, want := range []string{"proto=" + proto, "n=200", "early=0"} {
				if !strings.Contains(out, want) {
					t.Errorf("%s: paced spread output lacks %q:\n%s", proto, want, out)
				}
			}
		}
	})
	t.Run("http/burst/take", func(t *testing.T) {
		code, out, errOut := run(t, "bench", targets["http"], "--mode", "burst", "-n", "300", "-c", "2", "--take", "50", "--lead", "2s", "--timeout", "60s", "--line")
		if code != 0 {
			t.Fatalf("bench exited %d: %s", code, errOut)
		}
		for _, want := range []string{"n=300", "take=50", "early=0"} {
			if !strings.Contains(out, want) {
				t.Errorf("bench --take output lacks %q:\n%s", want, out)
			}
		}
	})
}
