package sdnotify

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// listen makes a unixgram socket as systemd does and points
// $NOTIFY_SOCKET at it.
func listen(t *testing.T, name string) *net.UnixConn {
	t.Helper()
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", name)
	return conn
}

func recv(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("read notification: %v", err)
	}
	return string(buf[:n])
}

func TestReadyAndStoppingOneDatagramEach(t *testing.T) {
	conn := listen(t, filepath.Join(t.TempDir(), "notify"))
	n := FromEnv()
	if err := n.Ready("serving\nHTTP"); err != nil {
		t.Fatal(err)
	}
	if got, want := recv(t, conn), "READY=1\nSTATUS=serving HTTP"; got != want {
		t.Errorf("Ready sent %q, want %q (one line of status)", got, want)
	}
	if err := n.Stopping("bye"); err != nil {
		t.Fatal(err)
	}
	if got, want := recv(t, conn), "STOPPING=1\nSTATUS=bye"; got != want {
		t.Errorf("Stopping sent %q, want %q", got, want)
	}
}

// TestAbstractSocket: systemd may name a socket in the abstract
// namespace with a leading '@'.
func TestAbstractSocket(t *testing.T) {
	name := "@delayq-sdnotify-test-" + strconv.Itoa(os.Getpid())
	conn := listen(t, name)
	if err := FromEnv().Notify("READY=1"); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, conn); got != "READY=1" {
		t.Errorf("got %q over the abstract socket", got)
	}
}

func TestWithoutSystemdNothingHappens(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", "")
	n := FromEnv()
	if n != nil {
		t.Fatalf("FromEnv() = %+v without NOTIFY_SOCKET, want nil", n)
	}
	if err := n.Ready("x"); err != nil {
		t.Errorf("Ready on nil = %v", err)
	}
	n.Watchdog(t.Context(), time.Millisecond, func() error { return nil }) // returns at once
}

func TestWatchdogInterval(t *testing.T) {
	pid := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		usec, pid string
		want      time.Duration
	}{
		{"", "", 0},
		{"30000000", "", 15 * time.Second},
		{"30000000", pid, 15 * time.Second},
		{"30000000", "1", 0}, // meant for another process
		{"-5", "", 0},
		{"x", "", 0},
	} {
		t.Setenv("WATCHDOG_USEC", tc.usec)
		t.Setenv("WATCHDOG_PID", tc.pid)
		if got := WatchdogInterval(); got != tc.want {
			t.Errorf("WATCHDOG_USEC=%q WATCHDOG_PID=%q: interval %v, want %v", tc.usec, tc.pid, got, tc.want)
		}
	}
}

// TestWatchdogStopsWhenNotAlive: pings while alive, then a status saying
// why, then silence, so systemd's deadline passes.
func TestWatchdogStopsWhenNotAlive(t *testing.T) {
	conn := listen(t, filepath.Join(t.TempDir(), "notify"))
	calls := 0
	done := make(chan struct{})
	go func() {
		defer close(done)
		FromEnv().Watchdog(context.Background(), time.Millisecond, func() error {
			calls++
			if calls > 2 {
				return errors.New("engine stopped")
			}
			return nil
		})
	}()
	for i := 0; i < 2; i++ {
		if got := recv(t, conn); got != "WATCHDOG=1" {
			t.Fatalf("ping %d: %q", i, got)
		}
	}
	if got, want := recv(t, conn), "STATUS=watchdog pings stopped: engine stopped"; got != want {
		t.Fatalf("after the failure: %q, want %q", got, want)
	}
	<-done
	_ = conn.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if n, err := conn.Read(make([]byte, 64)); err == nil {
		t.Errorf("%d bytes sent after the pings stopped", n)
	}
}
