package beanstalk

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store/memstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testServer is an in-process delayq serving the beanstalkd protocol.
type testServer struct {
	srv    *Server
	engine *engine.Engine
	addr   string
}

// runUntilCleanup runs e's timer loop and s on l until the test ends,
// then shuts both down and checks that they stopped cleanly.
func runUntilCleanup(t *testing.T, e *engine.Engine, s *Server, l net.Listener) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	engineDone := make(chan struct{})
	go func() {
		defer close(engineDone)
		e.Run(ctx)
	}()
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	t.Cleanup(func() {
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if err := s.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		if err := <-served; !errors.Is(err, ErrServerClosed) {
			t.Errorf("Serve returned %v, want ErrServerClosed", err)
		}
		cancel()
		<-engineDone
	})
}

// startDelayq starts an engine over a memstore and a beanstalk Server on a
// free loopback port; both stop when the test ends.
func startDelayq(t *testing.T, limits Limits) *testServer {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(memstore.New(), engine.Config{Logger: logger})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Engine: e, Limits: limits, Logger: logger}
	runUntilCleanup(t, e, s, l)
	// Dial once as startBeanstalkd does to see it listen, so that both
	// servers' total-connections agree.
	if c, err := net.Dial("tcp", l.Addr().String()); err == nil {
		c.Close()
	}
	for s.connCount() > 0 {
		time.Sleep(time.Millisecond)
	}
	return &testServer{srv: s, engine: e, addr: l.Addr().String()}
}

// TestPipelinedRepliesBeforeBlockingReserve sends a put and a blocking
// reserve in one write: the put's reply must arrive while the reserve
// still waits, though serve batches the replies of pipelined commands.
func TestPipelinedRepliesBeforeBlockingReserve(t *testing.T) {
	ts := startDelayq(t, Limits{})
	nc, err := net.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// Without the flush the replies never come: fail instead of hanging.
	nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := nc.Write([]byte("use other\r\nput 0 0 60 2\r\nhi\r\nreserve\r\n")); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(nc)
	for _, want := range []string{"USING other\r\n", "INSERTED 1\r\n"} {
		got, err := r.ReadString('\n')
		if err != nil || got != want {
			t.Fatalf("read %q, %v; want %q", got, err, want)
		}
	}
}
