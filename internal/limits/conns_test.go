package limits

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// serveHTTP serves h behind l as the server does (ConnContext, Answers,
// HTTP/1 and h2c) until the test ends.
func serveHTTP(t *testing.T, l *Listener, h http.Handler) {
	t.Helper()
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: Answers(h, AnswerOptions{}), ConnContext: WithConn, Protocols: p}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

func listen(t *testing.T, o ConnOptions) *Listener {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ConnListener(raw, o)
}

// waitFor polls cond (observable state) for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
	}
}

// Issue 28 item 5: an HTTP/2 connection without TLS that sends only its
// preface, and a connection that sends nothing, are closed once
// FirstRequest has passed without a request; one that makes a request in
// time is kept. (HTTP/2's own idle timeout, the only bound before, held
// them for 2 minutes.)
func TestConnWithoutARequestClosed(t *testing.T) {
	t.Parallel()
	l := listen(t, ConnOptions{FirstRequest: 200 * time.Millisecond})
	serveHTTP(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	preface, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer preface.Close()
	io.WriteString(preface, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
	silent, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	served := &http.Client{Transport: &http.Transport{}}
	defer served.CloseIdleConnections()
	resp, err := served.Get("http://" + l.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	waitFor(t, "the connections without a request closed", func() bool { return l.Open() == 1 })
	for name, c := range map[string]net.Conn{"preface only": preface, "silent": silent} {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadAll(c); err != nil {
			t.Errorf("%s: not closed by the server: %v", name, err)
		}
	}
}

// TestConnClaimPerToken: a token's connections count against its share
// wherever they come from; over it, an idle connection of the token is
// reclaimed if there is one, else the request is refused with
// too_many_connections. A connection is counted once, for its first
// token.
func TestConnClaimPerToken(t *testing.T) {
	t.Parallel()
	l := listen(t, ConnOptions{PerClient: 2, Reclaim: true})
	claims := make(chan error, 8)
	serveHTTP(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := ConnFrom(r.Context()).Claim(r.URL.Query().Get("token"))
		claims <- err
		if r.URL.Query().Get("hold") != "" {
			<-r.Context().Done() // busy until the client goes
		}
	}))
	send := func(c net.Conn, query string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET /?"+query+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	ip := byte(10)
	dial := func() net.Conn {
		t.Helper()
		// Addresses apart, so only the token's share binds.
		ip++
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, ip)}}).Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	for range 2 {
		send(dial(), "token=a&hold=1")
		if err := <-claims; err != nil {
			t.Fatal(err)
		}
	}
	send(dial(), "token=a")
	var le *delayq.LimitError
	if err := <-claims; !errors.As(err, &le) || le.Code != api.CodeTooManyConns {
		t.Fatalf("a third busy connection of token a: %v, want too_many_connections", err)
	}
	send(dial(), "token=b")
	if err := <-claims; err != nil {
		t.Fatalf("another token: %v", err)
	}
	if l.Refused() != 1 {
		t.Fatalf("Refused = %d", l.Refused())
	}
}

// TestConnReclaimsOwnIdleAtShare: a client at its share that opens one
// more connection gets it in place of its own idle one; no other
// client's connection is touched.
func TestConnReclaimsOwnIdleAtShare(t *testing.T) {
	t.Parallel()
	l := listen(t, ConnOptions{PerClient: 1, Reclaim: true})
	serveHTTP(t, l, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	get := func(ip string) net.Conn {
		t.Helper()
		c, err := (&net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}).Dial("tcp", l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		return c
	}
	other := get("127.0.0.2")
	first := get("127.0.0.1")
	waitFor(t, "two served", func() bool { return l.Open() == 2 })
	// Refused until the first has been idle for reclaimGrace.
	waitFor(t, "the second connection in place of the idle first", func() bool {
		if l.Reclaimed() == 1 {
			return true
		}
		get("127.0.0.1")
		time.Sleep(20 * time.Millisecond) // the client's back-off between retries
		return false
	})
	first.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadAll(first); err != nil {
		t.Fatalf("the idle first connection was not closed: %v", err)
	}
	other.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	if _, err := other.Read(make([]byte, 512)); err != nil {
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			// It may hold its answer still; it must not be closed.
			t.Fatalf("another client's connection was touched: %v", err)
		}
	}
}

func TestClientKey(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.2:5000":             "127.0.0.2",
		"[::ffff:10.0.0.1]:80":       "10.0.0.1",
		"[2001:db8:1:2:3:4:5:6]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:2:ffff::1]:443": "2001:db8:1:2::/64",
		"[2001:db8:1:3::1]:443":      "2001:db8:1:3::/64",
	} {
		a, err := net.ResolveTCPAddr("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if got := ClientKey(a); got != want {
			t.Errorf("ClientKey(%s) = %s, want %s", addr, got, want)
		}
	}
}
