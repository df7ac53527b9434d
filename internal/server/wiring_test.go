package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/client"
)

// TestBeanstalkAndHTTPShareOneEngine puts a job over the beanstalkd
// protocol and reads it over HTTP: both front ends are wired to one engine.
func TestBeanstalkAndHTTPShareOneEngine(t *testing.T) {
	s := New(testConfig(t), nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })

	conn, err := net.DialTimeout("tcp", s.BeanstalkAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatalf("dial beanstalk: %v", err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	send := func(cmd, want string) {
		t.Helper()
		if _, err := conn.Write([]byte(cmd)); err != nil {
			t.Fatal(err)
		}
		got, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(got, want) {
			t.Fatalf("%q answered %q, %v; want %q...", cmd, got, err, want)
		}
	}
	send("use orders\r\n", "USING orders")
	send("put 7 0 60 5\r\nhello\r\n", "INSERTED ")

	c := client.New([]string{s.URL()}, client.Discovery(0))
	jobs, err := c.Reserve(t.Context(), []string{"orders"}, 1, 0)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve over HTTP = %v, %v; want the job put over beanstalkd", jobs, err)
	}
	if j := jobs[0]; string(j.Body) != "hello" || j.Priority != 7 {
		t.Errorf("job = body %q priority %d, want hello / 7", j.Body, j.Priority)
	}
}

func TestBeanstalkCanBeTurnedOff(t *testing.T) {
	cfg := testConfig(t)
	cfg.BeanstalkAddr = ""
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer s.Shutdown(context.Background())
	if a := s.BeanstalkAddr(); a != nil {
		t.Errorf("BeanstalkAddr() = %v with the protocol off, want nil", a)
	}
	if _, err := s.Engine().Topics(t.Context()); err != nil {
		t.Errorf("engine not serving: %v", err)
	}
}

// TestDashboardAndCrossOriginProtection checks the dashboard is served and
// that a browser request from another origin cannot change anything.
func TestDashboardAndCrossOriginProtection(t *testing.T) {
	s := New(testConfig(t), nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	resp, err := http.Get(s.URL() + "/ui/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
		t.Errorf("GET /ui/ = %d %s, want 200 text/html", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	req, _ := http.NewRequest("POST", s.URL()+"/v1/topics/t/jobs", strings.NewReader(`{"body":"x"}`))
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("cross-site POST = %d, want 403", resp.StatusCode)
	}
	if ts, _ := s.Engine().Topics(t.Context()); len(ts) != 0 {
		t.Errorf("a cross-site put was stored: %v", ts)
	}
}

// TestDebugListener checks that --debug-addr serves the profiler on its own
// port, that the API port does not, and that it is off by default.
func TestDebugListener(t *testing.T) {
	cfg := testConfig(t)
	cfg.DebugAddr = "127.0.0.1:0"
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer s.Shutdown(context.Background())
	get := func(url string) int {
		t.Helper()
		resp, err := http.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := get("http://" + s.DebugAddr().String() + "/debug/pprof/cmdline"); code != http.StatusOK {
		t.Errorf("debug listener /debug/pprof/cmdline = %d, want 200", code)
	}
	if code := get(s.URL() + "/debug/pprof/cmdline"); code != http.StatusNotFound {
		t.Errorf("API port /debug/pprof/cmdline = %d, want 404", code)
	}
	off := New(testConfig(t), nil)
	if err := off.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	defer off.Shutdown(context.Background())
	if a := off.DebugAddr(); a != nil {
		t.Errorf("DebugAddr() = %v by default, want nil (off)", a)
	}
}
