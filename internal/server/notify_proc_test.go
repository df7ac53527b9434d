package server

import (
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSystemdNotify runs the real binary as systemd runs a Type=notify
// unit with WatchdogSec: $NOTIFY_SOCKET names a unixgram socket this test
// listens on, $WATCHDOG_USEC asks for pings. The server must send
// READY=1 only once it serves (its HTTP answers when the message
// arrives), WATCHDOG=1 repeatedly, and STOPPING=1 on SIGTERM, then exit 0.
func TestSystemdNotify(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	d := buildDaemon(t)
	sock := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	cmd := exec.Command(d.bin, "serve", "--http-addr", "127.0.0.1:0", "--beanstalk-addr", "127.0.0.1:0", "--data-dir", d.dir)
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+sock, "WATCHDOG_USEC=200000") // pings every 100 ms
	cmd.Stderr = d.logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()

	read := func() string {
		t.Helper()
		buf := make([]byte, 4096)
		_ = conn.SetReadDeadline(time.Now().Add(60 * time.Second))
		n, err := conn.Read(buf)
		if err != nil {
			logs, _ := os.ReadFile(d.logs.Name())
			t.Fatalf("no notification from the server: %v; its log:\n%s", err, logs)
		}
		return string(buf[:n])
	}

	ready := read()
	if !strings.Contains(ready, "READY=1\n") {
		t.Fatalf("first notification %q, want READY=1 first", ready)
	}
	_, status, _ := strings.Cut(ready, "STATUS=serving HTTP on ")
	addr, _, _ := strings.Cut(status, ",")
	if addr == "" || !strings.Contains(status, "beanstalkd on 127.0.0.1:") {
		t.Fatalf("READY=1 came with %q, want a STATUS naming both listeners", ready)
	}
	// READY=1 means serving: the API answers right now.
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("GET /healthz right after READY=1: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz right after READY=1: %s", resp.Status)
	}

	for i := 0; i < 3; i++ {
		if msg := read(); msg != "WATCHDOG=1" {
			t.Fatalf("notification %q while serving, want WATCHDOG=1 (WATCHDOG_USEC=200000)", msg)
		}
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for {
		msg := read()
		if msg == "WATCHDOG=1" { // sent before the signal arrived
			continue
		}
		if !strings.HasPrefix(msg, "STOPPING=1\n") {
			t.Fatalf("notification %q after SIGTERM, want STOPPING=1", msg)
		}
		break
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			t.Fatalf("server after SIGTERM: %v, want exit 0", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("server still running 60s after SIGTERM")
	}
	// Nothing after STOPPING=1: the pings stopped with it.
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 4096)); err == nil {
		t.Errorf("a notification of %d bytes after STOPPING=1", n)
	}
}
