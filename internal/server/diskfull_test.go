package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestDiskFullAnswers runs a server whose free-space floor is above any
// disk: puts are refused as disk_full over HTTP (507) and OUT_OF_MEMORY
// over beanstalkd, /healthz says degraded and why, /readyz turns load
// balancers away, and reads still answer.
func TestDiskFullAnswers(t *testing.T) {
	cfg := testConfig(t)
	cfg.MinFreeMiB = 1 << 30 // 1 PiB
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })

	get := func(path string) (int, map[string]any) {
		t.Helper()
		var body map[string]any
		code := httpJSON(t, "GET", s.URL()+path, "", &body)
		return code, body
	}
	var perr map[string]map[string]string
	if code := httpJSON(t, "POST", s.URL()+"/v1/topics/t/jobs", `{"body":"x"}`, &perr); code != http.StatusInsufficientStorage || perr["error"]["code"] != "disk_full" {
		t.Errorf("put = %d %v, want 507 disk_full", code, perr)
	}
	if strings.Contains(perr["error"]["message"], cfg.DataDir) {
		t.Errorf("put error %q shows the data directory's path", perr["error"]["message"])
	}
	if code, body := get("/healthz"); code != http.StatusOK || body["status"] != "degraded" || !strings.Contains(body["reason"].(string), "floor") {
		t.Errorf("/healthz = %d %v, want 200 degraded with the reason", code, body)
	}
	if code, body := get("/readyz"); code != http.StatusServiceUnavailable || body["status"] != "degraded" {
		t.Errorf("/readyz = %d %v, want 503 degraded", code, body)
	}
	if code, _ := get("/v1/topics"); code != http.StatusOK {
		t.Errorf("/v1/topics = %d, want 200: reads still work", code)
	}

	conn, err := net.DialTimeout("tcp", s.BeanstalkAddr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := conn.Write([]byte("put 0 0 60 1\r\nx\r\n")); err != nil {
		t.Fatal(err)
	}
	if got, err := bufio.NewReader(conn).ReadString('\n'); err != nil || got != "OUT_OF_MEMORY\r\n" {
		t.Errorf("beanstalkd put = %q, %v; want OUT_OF_MEMORY", got, err)
	}
}

// httpJSON sends body (JSON, or none when "") and decodes the answer into
// out; it returns the status.
func httpJSON(t *testing.T, method, url, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: decode: %v", method, url, err)
	}
	return resp.StatusCode
}
