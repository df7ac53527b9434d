package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/server"
)

// benchServer starts an in-process server on the embedded store with HTTP
// and the beanstalkd protocol on free ports, stopped when t ends.
func benchServer(t *testing.T) *server.Server {
	t.Helper()
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
	return s
}

// TestBenchBothProtocols runs small bounded benches against one in-process
// server over HTTP and over the beanstalkd protocol.
func TestBenchBothProtocols(t *testing.T) {
	s := benchServer(t)
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

// TestBenchTopics: --topics 3 puts a run's jobs round-robin into three
// topics (the server's topic stats count them), and a reserve run with
// --topics 3 takes jobs from all three: over the beanstalkd protocol it
// finishes only if the connections watch every tube.
func TestBenchTopics(t *testing.T) {
	s := benchServer(t)
	bs := "beanstalk://" + s.BeanstalkAddr().String()
	topics := func() map[string]api.Topic {
		t.Helper()
		resp, err := http.Get(s.URL() + "/v1/topics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out api.TopicsResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		m := map[string]api.Topic{}
		for _, tp := range out.Topics {
			m[tp.Name] = tp
		}
		return m
	}
	for _, target := range []string{s.URL(), bs} {
		proto, _, _ := strings.Cut(target, ":")
		code, out, errOut := run(t, "bench", target, "--topic", "spread-"+proto, "--topics", "3", "-n", "31", "-c", "2", "--delay", "1h", "--line")
		if code != 0 {
			t.Fatalf("%s: bench --topics 3 exited %d: %s", proto, code, errOut)
		}
		if !strings.Contains(out, "topics=3") {
			t.Errorf("%s: result line lacks topics=3: %s", proto, out)
		}
		got := topics()
		for i, want := range []int{11, 10, 10} {
			name := fmt.Sprintf("spread-%s-%d", proto, i)
			if got[name].Delayed != want {
				t.Errorf("%s: topic %s holds %d delayed jobs, want %d (all topics: %+v)", proto, name, got[name].Delayed, want, got)
			}
		}
		if _, ok := got["spread-"+proto]; ok {
			t.Errorf("%s: jobs went to the bare prefix topic too: %+v", proto, got)
		}
	}
	// Reserve: the preload goes to three topics and the reserves must
	// take from all of them, or the run never reaches its 60 jobs.
	for _, target := range []string{s.URL(), bs} {
		proto, _, _ := strings.Cut(target, ":")
		code, _, errOut := run(t, "bench", target, "--mode", "reserve", "--topic", "take-"+proto, "--topics", "3", "-n", "60", "-c", "3", "--timeout", "30s", "--line")
		if code != 0 {
			t.Fatalf("%s: bench --mode reserve --topics 3 exited %d: %s", proto, code, errOut)
		}
		got := topics()
		for i := range 3 {
			tp := got[fmt.Sprintf("take-%s-%d", proto, i)]
			if tp.Ready != 0 || tp.Reserved != 0 {
				t.Errorf("%s: topic %+v still holds jobs after the reserve run", proto, tp)
			}
		}
	}
	for _, bad := range []string{"0", "1001"} {
		if code, _, errOut := run(t, "bench", bs, "--topics", bad); code != exitUsage || !strings.Contains(errOut, "--topics") {
			t.Errorf("bench --topics %s = %d %q, want a usage error", bad, code, errOut)
		}
	}
}
