package beanstalk

import (
	"bufio"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// roundTrip sends one line and reads one reply line.
func roundTrip(t *testing.T, c net.Conn, r *bufio.Reader, line string) string {
	t.Helper()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, line+"\r\n"); err != nil {
		t.Fatalf("write %q: %v", line, err)
	}
	reply, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("reply to %q: %v", line, err)
	}
	return strings.TrimSuffix(reply, "\r\n")
}

// closed waits for the server to close c.
func closed(t *testing.T, c net.Conn, within time.Duration) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(within))
	_, err := io.Copy(io.Discard, c)
	return err == nil // io.Copy reports EOF as nil
}

func TestSlowClients(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{MaxConns: 20, WriteTimeout: 200 * time.Millisecond, BodyTimeout: 200 * time.Millisecond})

	t.Run("body that never ends", func(t *testing.T) {
		c, _ := dial(t, ts.addr)
		io.WriteString(c, "put 0 0 60 10\r\nabc")
		if !closed(t, c, 5*time.Second) {
			t.Fatal("connection with an unfinished body was not closed")
		}
	})
	t.Run("client that never reads", func(t *testing.T) {
		c, r := dial(t, ts.addr)
		body := strings.Repeat("x", 65535)
		io.WriteString(c, "put 0 0 60 65535\r\n"+body+"\r\n")
		if reply, _ := r.ReadString('\n'); !strings.HasPrefix(reply, "INSERTED") {
			t.Fatalf("put = %q", reply)
		}
		// Ask for the 64 KiB job over and over without reading a reply.
		c.(*net.TCPConn).SetReadBuffer(4096)
		go func() {
			for i := 0; i < 2000; i++ {
				if _, err := io.WriteString(c, "peek-ready\r\n"); err != nil {
					return
				}
			}
		}()
		time.Sleep(time.Second)
		other, or := dial(t, ts.addr)
		if got := roundTrip(t, other, or, "list-tube-used"); got != "USING default" {
			t.Fatalf("another client got %q while one did not read", got)
		}
		for deadline := time.Now().Add(5 * time.Second); ts.srv.connCount() > 1; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections open, want the one that never reads closed", ts.srv.connCount())
			}
		}
	})
	t.Run("too many connections", func(t *testing.T) {
		// The subtests before closed their connections on their side; the
		// server may not have seen it yet, and a connection it still
		// counts would make one of these 20 the one over MaxConns.
		for deadline := time.Now().Add(5 * time.Second); ts.srv.connCount() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d connections of the subtests before still open", ts.srv.connCount())
			}
		}
		var conns []net.Conn
		for range 20 {
			c, r := dial(t, ts.addr)
			roundTrip(t, c, r, "list-tube-used")
			conns = append(conns, c)
		}
		extra, _ := dial(t, ts.addr)
		if !closed(t, extra, 5*time.Second) {
			t.Fatal("connection over MaxConns was not closed")
		}
		conns[0].Close()
		for ts.srv.connCount() >= 20 {
			time.Sleep(time.Millisecond)
		}
		c, r := dial(t, ts.addr)
		if got := roundTrip(t, c, r, "list-tube-used"); got != "USING default" {
			t.Fatalf("after a slot freed: %q", got)
		}
	})
}

// TestShutdownEndsWaitingReserve shows that Shutdown answers a waiting
// reserve and closes the connection instead of hanging.
func TestShutdownEndsWaitingReserve(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	c, r := dial(t, ts.addr)
	io.WriteString(c, "reserve\r\n")
	for ts.engine.Waiting("default") == 0 { // the reserve is parked
		time.Sleep(time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- ts.srv.Shutdown(t.Context()) }()
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if reply, err := r.ReadString('\n'); reply != "TIMED_OUT\r\n" {
		t.Fatalf("waiting reserve at shutdown got %q %v, want TIMED_OUT", reply, err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}
