package beanstalk

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store/memstore"
)

// countingListener hands out connections that count their Write calls:
// each is one write system call on the socket.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: nc, writes: &l.writes}, nil
}

type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// TestPipelinedRepliesOneWrite sends a use and three puts in one write:
// their four replies must go back in one write, not one per command, and
// a reserve + delete pipelined the same way (the job's id is known) in
// one more.
func TestPipelinedRepliesOneWrite(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(memstore.New(), engine.Config{Logger: logger})
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &countingListener{Listener: inner}
	runUntilCleanup(t, e, &Server{Engine: e, Logger: logger}, l)
	nc, err := net.Dial("tcp", inner.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(nc)
	expect := func(want ...string) {
		t.Helper()
		for _, w := range want {
			got, err := r.ReadString('\n')
			if err != nil || got != w {
				t.Fatalf("read %q, %v; want %q", got, err, w)
			}
		}
	}
	// One write, well within the server's 224-byte command buffer, so
	// one read on the server sees all of it.
	if _, err := nc.Write([]byte("use a\r\nput 0 0 60 2\r\nhi\r\nput 0 0 60 2\r\nho\r\nput 0 0 60 2\r\nhu\r\n")); err != nil {
		t.Fatal(err)
	}
	expect("USING a\r\n", "INSERTED 1\r\n", "INSERTED 2\r\n", "INSERTED 3\r\n")
	if n := l.writes.Load(); n != 1 {
		t.Fatalf("4 pipelined replies took %d writes, want 1", n)
	}
	if _, err := nc.Write([]byte("watch a\r\nreserve-with-timeout 0\r\ndelete 1\r\n")); err != nil {
		t.Fatal(err)
	}
	expect("WATCHING 2\r\n", "RESERVED 1 2\r\n", "hi\r\n", "DELETED\r\n")
	if n := l.writes.Load(); n != 2 {
		t.Fatalf("3 more pipelined replies took %d more writes, want 1", n-1)
	}
}
