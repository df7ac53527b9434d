package beanstalk

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
	"github.com/delayq/delayq/internal/store/storetest"
)

// toldReserveJob wraps a store so that each ReserveJob that reserved a
// job says so, before its answer goes out.
type toldReserveJob struct {
	store.Store
	reserved chan struct{}
}

func (s *toldReserveJob) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	j, err := s.Store.ReserveJob(ctx, p)
	if err == nil {
		s.reserved <- struct{}{}
	}
	return j, err
}

// serveOn runs an engine over st and a beanstalk Server on l until the
// test ends.
func serveOn(t *testing.T, st store.Store, l net.Listener) *engine.Engine {
	t.Helper()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(st, engine.Config{Logger: logger})
	s := &Server{Engine: e, Logger: logger}
	runUntilCleanup(t, e, s, l)
	return e
}

// putOnce puts a max_attempts=1 job into the default tube.
func putOnce(t *testing.T, e *engine.Engine) *delayq.Job {
	t.Helper()
	once := 1
	jobs, err := e.Put(context.Background(), []engine.PutRequest{{Topic: defaultTube, MaxAttempts: &once, Body: []byte("once")}})
	if err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

// checkGivenBack waits for job j to leave reserved and checks that it went
// back ready with no attempt spent, and that the next consumer gets it.
func checkGivenBack(t *testing.T, e *engine.Engine, j *delayq.Job) {
	t.Helper()
	var got *delayq.Job
	var err error
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		got, err = e.Get(context.Background(), delayq.Ref{Seq: j.Seq})
		if err != nil || got.State != delayq.StateReserved {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the job of the closed connection is still reserved after 5s")
		}
	}
	if err != nil || got.State != delayq.StateReady || got.Attempts != 0 || got.Releases != 0 || got.Buries != 0 {
		t.Fatalf("job after its connection closed = %+v, %v; want ready with attempts 0, no release, no bury", got, err)
	}
	next, err := e.Reserve(context.Background(), engine.ReserveRequest{Topics: []string{defaultTube}})
	if err != nil || len(next) != 1 || next[0].Seq != j.Seq || next[0].Attempts != 1 {
		t.Fatalf("next consumer's reserve = %v, %v; want the job on its first attempt", next, err)
	}
}

// TestClosedMidReserveCostsNoAttempt closes a real TCP connection whose
// waiting reserve the store has just given a max_attempts=1 job: the job
// goes back ready with no attempt spent. Released instead, it was buried
// without ever reaching anyone.
func TestClosedMidReserveCostsNoAttempt(t *testing.T) {
	gate := storetest.NewHangUpGate(memstore.New())
	gate.Armed.Store(true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := serveOn(t, gate, l)
	nc, br := dial(t, l.Addr().String())
	defer nc.Close()
	if _, err := nc.Write([]byte("reserve\r\n")); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); e.Waiting(defaultTube) != 1; time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reserve did not start waiting within 5s")
		}
	}
	j := putOnce(t, e)
	select {
	case <-gate.Reserved:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reserve did not reserve the job put meanwhile")
	}
	nc.Close() // the client goes away; the store has reserved its job
	if line, err := br.ReadString('\n'); err == nil {
		t.Errorf("the closed connection read %q", line)
	}
	checkGivenBack(t, e, j)
}

// pipeListener hands out one end of a net.Pipe, then waits to be closed.
// A pipe has no buffer: a reply written after the client closed its end
// fails for certain, the case a TCP socket shows only by chance.
type pipeListener struct {
	once   sync.Once
	conns  chan net.Conn
	closed chan struct{}
}

func newPipeListener() (*pipeListener, net.Conn) {
	server, client := net.Pipe()
	l := &pipeListener{conns: make(chan net.Conn, 1), closed: make(chan struct{})}
	l.conns <- server
	return l, client
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// TestReplyNeverSentCostsNoAttempt: a client that sends reserve-job and
// closes before its RESERVED reply can go out never gets the job, so the
// job goes back ready with no attempt spent.
func TestReplyNeverSentCostsNoAttempt(t *testing.T) {
	l, client := newPipeListener()
	st := &toldReserveJob{Store: memstore.New(), reserved: make(chan struct{}, 1)}
	e := serveOn(t, st, l)
	j := putOnce(t, e)
	// Write returns once the server has read the whole command.
	if _, err := client.Write([]byte("reserve-job " + strconv.FormatUint(j.Seq, 10) + "\r\n")); err != nil {
		t.Fatal(err)
	}
	client.Close()
	select {
	case <-st.reserved:
	case <-time.After(5 * time.Second):
		t.Fatal("reserve-job did not reserve the job")
	}
	checkGivenBack(t, e, j)
}
