package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// dialFrom connects to s's HTTP port from the loopback address ip.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// getOn sends GET path on c and returns the answer's status and body.
func getOn(t *testing.T, c net.Conn, path string) (int, string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: localhost\r\n\r\n", path)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// Issue 28 item 5: one client (127.0.0.1) that keeps as many busy
// connections as it can (long-polling reserves) holds only its share,
// half of --max-http-conns: its next connection is refused, and another
// address (127.0.0.2) is still served. (On the old build the first
// client took every slot and the other got 503 too_many_connections.)
func TestOneClientHoldsOnlyItsShareOfConnections(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxHTTPConns = 4
	s := startServer(t, cfg, &syncBuffer{})
	addr := s.Addr().String()

	var conns []net.Conn
	for range 4 {
		c := dialFrom(t, "127.0.0.1", addr)
		body := `{"topics":["idle"],"wait":"30s"}`
		fmt.Fprintf(c, "POST /v1/reserve HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		conns = append(conns, c)
	}
	waitUntil(t, "two reserves waiting and two connections refused", func() bool {
		return s.Engine().Waiting("idle") == 2 && s.sec.conns.Refused() == 2
	})
	refusals := 0
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue // a waiting reserve
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 503 || !strings.Contains(string(b), api.CodeTooManyConns) || !strings.Contains(string(b), "share") {
			t.Fatalf("the first client's extra connection: %d %s", resp.StatusCode, b)
		}
		refusals++
	}
	if refusals != 2 {
		t.Fatalf("%d refusals read, want 2", refusals)
	}

	other := dialFrom(t, "127.0.0.2", addr)
	if status, body := getOn(t, other, "/healthz"); status != 200 {
		t.Fatalf("another address, while the first holds its share: %d %s", status, body)
	}
}

// Issue 28 item 5: idle keep-alive connections give their slots to a
// newcomer when every slot is taken: two clients keep two idle
// connections each at --max-http-conns 4, and a third client is served
// once the idle ones have been idle a moment (on the old build it got 503
// for as long as they stayed).
func TestIdleConnectionsReclaimedForNewcomers(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxHTTPConns = 4
	s := startServer(t, cfg, &syncBuffer{})
	addr := s.Addr().String()
	var idle []net.Conn
	for _, ip := range []string{"127.0.0.1", "127.0.0.1", "127.0.0.2", "127.0.0.2"} {
		c := dialFrom(t, ip, addr)
		if status, body := getOn(t, c, "/healthz"); status != 200 {
			t.Fatalf("%s: %d %s", ip, status, body)
		}
		idle = append(idle, c)
	}
	// The newcomer retries while it is refused, as a client would; a
	// connection becomes idle enough to reclaim a second after its last
	// request.
	served := false
	for deadline := time.Now().Add(10 * time.Second); !served && time.Now().Before(deadline); {
		c := dialFrom(t, "127.0.0.3", addr)
		status, _ := getOn(t, c, "/healthz")
		served = status == 200
		if !served {
			time.Sleep(50 * time.Millisecond) // the client's back-off between retries
		}
	}
	if !served {
		t.Fatal("a newcomer was refused for 10s while 4 connections sat idle")
	}
	if n := s.sec.conns.Reclaimed(); n < 1 {
		t.Fatalf("served, but %d connections reclaimed", n)
	}
	closed := 0
	for _, c := range idle {
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		if _, err := c.Read(make([]byte, 1)); err == io.EOF || err != nil && !isTimeout(err) {
			closed++
		}
	}
	if closed != 1 {
		t.Fatalf("%d idle connections closed, want the one reclaimed", closed)
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// Issue 28 item 5, beanstalkd: one address holds at most its share of
// the beanstalkd listener's connections (half of --max-beanstalk-conns
// here); its next connection is closed at once, and another address is
// still served. (On the old build the first client took every slot.)
func TestBeanstalkShareOfConnections(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxBeanstalkConns = 4
	s := startServer(t, cfg, &syncBuffer{})
	addr := s.BeanstalkAddr().String()
	for range 3 {
		dialFrom(t, "127.0.0.1", addr)
	}
	waitUntil(t, "the third connection refused", func() bool { return s.sec.bconns.Refused() == 1 })
	if n := s.sec.bconns.Open(); n != 2 {
		t.Fatalf("%d connections of the first client open, want its share of 2", n)
	}
	c := dialFrom(t, "127.0.0.2", addr)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "list-tubes\r\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "OK ") {
		t.Fatalf("another address: %q, %v", line, err)
	}
}
