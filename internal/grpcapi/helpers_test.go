package grpcapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testAPI is the gRPC handler over a real engine (timer running) on a
// real store, served by a real HTTP server on a loopback port that speaks
// HTTP/1.1 and HTTP/2 without TLS (h2c), and a grpc-go client of it.
type testAPI struct {
	t    testing.TB
	e    *engine.Engine
	srv  *httptest.Server
	conn *grpc.ClientConn
}

// newAPI serves from the durable diskstore in a temp dir.
func newAPI(t testing.TB, o Options) *testAPI {
	t.Helper()
	st, err := diskstore.Open(t.TempDir(), diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatalf("diskstore.Open: %v", err)
	}
	return startAPI(t, st, o)
}

func startAPI(t testing.TB, st store.Store, o Options) *testAPI {
	t.Helper()
	e := engine.New(st, engine.Config{Logger: discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	if o.Logger == nil {
		o.Logger = discard()
	}
	path, h := New(e, o)
	mux := http.NewServeMux()
	mux.Handle(path, h)
	for _, p := range StandardPrefixes {
		mux.Handle(p, h)
	}
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.Protocols = new(http.Protocols)
	srv.Config.Protocols.SetHTTP1(true)
	srv.Config.Protocols.SetUnencryptedHTTP2(true)
	srv.Start()
	conn, err := grpc.NewClient("passthrough:///"+srv.Listener.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		conn.Close()
		srv.Close()
		e.Drain()
		cancel()
		<-done
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	})
	return &testAPI{t: t, e: e, srv: srv, conn: conn}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// call invokes one method of DelayQService by its name with grpc-go.
func (a *testAPI) call(ctx context.Context, method string, in, out proto.Message, opts ...grpc.CallOption) error {
	return a.conn.Invoke(ctx, "/delayq.v1.DelayQService/"+method, in, out, opts...)
}

// must invokes a method that must succeed.
func (a *testAPI) must(method string, in, out proto.Message) {
	a.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.call(ctx, method, in, out); err != nil {
		a.t.Fatalf("%s(%v) = %v", method, in, err)
	}
}

// infoOf returns a call error's status and its ErrorInfo detail, failing
// when it has none.
func errInfo(t testing.TB, err error) (*status.Status, *delayqv1.ErrorInfo) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("error %v is not a gRPC status", err)
	}
	for _, d := range st.Details() {
		if info, ok := d.(*delayqv1.ErrorInfo); ok {
			return st, info
		}
	}
	t.Fatalf("status %v has no delayq.v1.ErrorInfo detail (details %v)", st, st.Details())
	return nil, nil
}

// waitFor polls cond, which reads observable state, until it holds.
func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
	}
}

var errNoAnswer = errors.New("the gone client got an answer")
