package beanstalk

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store/memstore"
)

// startGuarded is startDelayq with the engine's and the server's settings
// in the test's hands.
func startGuarded(t *testing.T, ecfg engine.Config, set func(*Server)) *testServer {
	t.Helper()
	logger := slog.New(slog.DiscardHandler)
	ecfg.Logger = logger
	e := engine.New(memstore.New(), ecfg)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Engine: e, Logger: logger}
	set(s)
	runUntilCleanup(t, e, s, l)
	return &testServer{srv: s, engine: e, addr: l.Addr().String()}
}

// A web page can make a browser POST to any host:port. The request's
// lines must not run as commands: the first line closes the connection.
func TestHTTPRequestIsClosed(t *testing.T) {
	t.Parallel()
	ts := startGuarded(t, engine.Config{}, func(*Server) {})
	for name, req := range map[string]string{
		"post": "POST / HTTP/1.1\r\nHost: 127.0.0.1:11300\r\nContent-Type: text/plain\r\nContent-Length: 19\r\n\r\nput 0 0 60 1\r\nx\r\n",
		"get":  "GET /?put HTTP/1.1\r\nHost: evil.example\r\n\r\n",
		"host": "use t\r\nHost: evil.example\r\nput 0 0 60 1\r\nx\r\n",
	} {
		c, _ := dial(t, ts.addr)
		io.WriteString(c, req)
		if !closed(t, c, 5*time.Second) {
			t.Errorf("%s: the connection stayed open", name)
		}
	}
	if _, err := ts.engine.Get(context.Background(), delayq.Ref{Seq: 1}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("a job was put from an HTTP request: %v", err)
	}
	// A real client is unaffected.
	c, r := dial(t, ts.addr)
	if got := roundTrip(t, c, r, "use t"); got != "USING t" {
		t.Fatal(got)
	}
}

func principal(t *testing.T, entry string) *auth.Principal {
	t.Helper()
	s, err := auth.Load("", `{"tokens":[{"name":"p","sha256":"`+auth.HashToken("tok")+`",`+entry+`}]}`)
	if err != nil {
		t.Fatal(err)
	}
	return s.ByToken("tok")
}

func TestScopes(t *testing.T) {
	t.Parallel()
	producer := principal(t, `"scopes":["produce"],"topics":["order*"]`)
	ts := startGuarded(t, engine.Config{}, func(s *Server) {
		s.Admit = func(_ context.Context, nc net.Conn) *auth.Principal { return producer }
	})
	t.Run("put on its topic", func(t *testing.T) {
		c, r := dial(t, ts.addr)
		roundTrip(t, c, r, "use orders")
		if got := roundTrip(t, c, r, "put 0 0 60 1\r\nx"); !strings.HasPrefix(got, "INSERTED") {
			t.Fatal(got)
		}
	})
	for cmd, setup := range map[string]string{
		"put 0 0 60 1\r\nx":      "use mail",
		"reserve-with-timeout 0": "watch orders",
		"stats":                  "",
		"pause-tube orders 1":    "",
		"peek 1":                 "",
	} {
		t.Run(strings.Fields(cmd)[0], func(t *testing.T) {
			c, r := dial(t, ts.addr)
			if setup != "" {
				roundTrip(t, c, r, setup)
			}
			if got := roundTrip(t, c, r, cmd); got != "UNAUTHORIZED" {
				t.Fatalf("%q = %q, want UNAUTHORIZED", cmd, got)
			}
			if !closed(t, c, 5*time.Second) {
				t.Fatal("the connection stayed open after UNAUTHORIZED")
			}
		})
	}
}

func TestNobody(t *testing.T) {
	t.Parallel()
	ts := startGuarded(t, engine.Config{}, func(s *Server) {
		s.Admit = func(context.Context, net.Conn) *auth.Principal { return nil }
	})
	c, r := dial(t, ts.addr)
	if got := roundTrip(t, c, r, "list-tubes"); got != "UNAUTHORIZED" {
		t.Fatal(got)
	}
}

// 10,000 idle connections used to lock every new client out. With a cap
// and an idle timeout, idle ones are closed and new clients get in.
func TestIdleConnectionsDoNotLockOut(t *testing.T) {
	t.Parallel()
	const max = 50
	ts := startGuarded(t, engine.Config{}, func(s *Server) {
		s.Limits = Limits{MaxConns: max, IdleTimeout: 300 * time.Millisecond}
	})
	var idle []net.Conn
	for range max {
		c, err := net.Dial("tcp", ts.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		idle = append(idle, c)
	}
	for ts.srv.connCount() < max {
		time.Sleep(time.Millisecond) // until the server has accepted them all
	}
	// Full: the next client is turned away at once...
	c, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	if !closed(t, c, 5*time.Second) {
		t.Fatal("a connection over the cap was kept")
	}
	c.Close()
	// ...until the idle ones time out.
	for _, c := range idle {
		if !closed(t, c, 5*time.Second) {
			t.Fatal("an idle connection was not closed")
		}
	}
	for ts.srv.connCount() > 0 {
		time.Sleep(time.Millisecond)
	}
	c, r := dial(t, ts.addr)
	if got := roundTrip(t, c, r, "use t"); got != "USING t" {
		t.Fatal(got)
	}
}

func TestWaitingReservesBound(t *testing.T) {
	t.Parallel()
	ts := startGuarded(t, engine.Config{MaxWaiting: 1}, func(*Server) {})
	a, _ := dial(t, ts.addr)
	io.WriteString(a, "reserve-with-timeout 30\r\n")
	for ts.srv.stats.waiting.Load() < 1 || ts.engine.Waiting("default") < 1 {
		time.Sleep(time.Millisecond)
	}
	b, r := dial(t, ts.addr)
	if got := roundTrip(t, b, r, "reserve-with-timeout 30"); got != "OUT_OF_MEMORY" {
		t.Fatalf("a reserve over the bound = %q, want OUT_OF_MEMORY", got)
	}
	// The bound refuses only the reserve: b is still served.
	if got := roundTrip(t, b, r, "put 0 0 60 1\r\nx"); !strings.HasPrefix(got, "INSERTED") {
		t.Fatal(got)
	}
	ar := bufio.NewReader(a)
	a.SetReadDeadline(time.Now().Add(5 * time.Second))
	if line, _ := ar.ReadString('\n'); !strings.HasPrefix(line, "RESERVED") {
		t.Fatalf("the waiting reserve got %q", line)
	}
}

// A watch list longer than a reserve may name used to be accepted, and
// every reserve then failed with BAD_FORMAT.
func TestWatchBound(t *testing.T) {
	t.Parallel()
	ts := startGuarded(t, engine.Config{MaxReserveTopics: 3}, func(*Server) {})
	c, r := dial(t, ts.addr)
	for i, want := range []string{"WATCHING 2", "WATCHING 3", "OUT_OF_MEMORY", "WATCHING 3"} {
		tube := []string{"a", "b", "c", "b"}[i]
		if got := roundTrip(t, c, r, "watch "+tube); got != want {
			t.Fatalf("watch %s = %q, want %q", tube, got, want)
		}
	}
	if got := roundTrip(t, c, r, "reserve-with-timeout 0"); got != "TIMED_OUT" {
		t.Fatalf("reserve = %q", got)
	}
}

// A worker busy with a job sends nothing for a while: the idle timeout
// must not close it (that would hand its job to another worker).
func TestIdleTimeoutSparesWorkersHoldingJobs(t *testing.T) {
	t.Parallel()
	ts := startGuarded(t, engine.Config{}, func(s *Server) { s.Limits = Limits{IdleTimeout: 100 * time.Millisecond} })
	worker, wr := dial(t, ts.addr)
	if got := roundTrip(t, worker, wr, "put 0 0 60 1\r\nx"); !strings.HasPrefix(got, "INSERTED") {
		t.Fatal(got)
	}
	if got := roundTrip(t, worker, wr, "reserve"); !strings.HasPrefix(got, "RESERVED") {
		t.Fatal(got)
	}
	wr.ReadString('\n') // the body
	// A connection that starts idling after the worker did is closed; by
	// then the worker has been idle longer, and must still be open.
	idler, ir := dial(t, ts.addr)
	roundTrip(t, idler, ir, "list-tube-used")
	if !closed(t, idler, 5*time.Second) {
		t.Fatal("an idle connection was kept")
	}
	if got := roundTrip(t, worker, wr, "delete 1"); got != "DELETED" {
		t.Fatalf("the worker after the idle timeout: %q", got)
	}
}

// Every command maps to an operation auth's table knows: a command added
// without one is refused to every token (authorize), and this says why.
func TestEveryCommandHasAnOperation(t *testing.T) {
	t.Parallel()
	for _, p := range prefixes {
		o, ok := authOps[p.op]
		if !ok {
			t.Errorf("command %q has no operation in authOps", p.text)
			continue
		}
		if _, ok := auth.NeedOf(o); !ok {
			t.Errorf("command %q: operation %q is not in auth's table", p.text, o)
		}
	}
}
