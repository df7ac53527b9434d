package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/tlsconf"
	"github.com/delayq/delayq/internal/tlsconf/tlstest"
)

// grpcConn is a grpc-go connection to the server's HTTP port, closed at
// the end of the test.
func grpcConn(t *testing.T, s *Server, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	if len(opts) == 0 {
		opts = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())} // h2c
	}
	conn, err := grpc.NewClient("passthrough:///"+s.Addr().String(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func invoke(ctx context.Context, conn *grpc.ClientConn, method string, in, out proto.Message, opts ...grpc.CallOption) error {
	return conn.Invoke(ctx, "/delayq.v1.DelayQService/"+method, in, out, opts...)
}

// TestGRPCOnTheHTTPPort: the real server answers grpc-go over HTTP/2
// without TLS (h2c) on its HTTP port, beside the HTTP API on the same
// port: a put, a reserve and a finish over gRPC, the same job seen over
// HTTP, and an error with its status and ErrorInfo.
func TestGRPCOnTheHTTPPort(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t), &syncBuffer{})
	conn := grpcConn(t, s)
	ctx := t.Context()

	var put delayqv1.PutResponse
	if err := invoke(ctx, conn, "Put", &delayqv1.PutRequest{Topic: "orders", Id: "o1", Body: []byte("close it")}, &put); err != nil {
		t.Fatal(err)
	}
	hc := plainClient(t)
	resp, err := hc.Get(s.URL() + "/v1/jobs/o1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"body":"close it"`) {
		t.Fatalf("the job over HTTP: %d %s", resp.StatusCode, b)
	}

	var res delayqv1.ReserveResponse
	var p peer.Peer
	if err := invoke(ctx, conn, "Reserve", &delayqv1.ReserveRequest{Topics: []string{"orders"}, Wait: nil}, &res, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	if len(res.Jobs) != 1 || res.Jobs[0].Id != "o1" || string(res.Jobs[0].Body) != "close it" {
		t.Fatalf("reserve = %v", &res)
	}
	if err := invoke(ctx, conn, "Finish", &delayqv1.FinishRequest{Id: "o1", Reservation: res.Jobs[0].Reservation}, &delayqv1.FinishResponse{}); err != nil {
		t.Fatal(err)
	}
	err = invoke(ctx, conn, "Finish", &delayqv1.FinishRequest{Id: "never", Reservation: res.Jobs[0].Reservation}, &delayqv1.FinishResponse{})
	st := status.Convert(err)
	if st.Code() != codes.NotFound || len(st.Details()) != 1 || st.Details()[0].(*delayqv1.ErrorInfo).GetCode() != delayq.CodeNotFound {
		t.Fatalf("second finish = %v %v", st, st.Details())
	}
}

// connectCall posts body to a method in the Connect protocol's JSON over
// HTTP/1.1 and returns the status and the answer.
func connectCall(t *testing.T, hc *http.Client, s *Server, method, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest("POST", s.URL()+"/delayq.v1.DelayQService/"+method, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Fatalf("answered over %s, want HTTP/1.1", resp.Proto)
	}
	var v map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s answer %d %q is not JSON: %v", method, resp.StatusCode, b, err)
	}
	return resp.StatusCode, v
}

// TestConnectJSONOverHTTP1: a plain HTTP/1.1 client speaking the Connect
// protocol's JSON (what curl does) puts, reserves, updates and finishes;
// an error answers the Connect error JSON with the delayq code in the
// ErrorInfo detail's debug form.
func TestConnectJSONOverHTTP1(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t), &syncBuffer{})
	hc := plainClient(t) // HTTP/1.1: no TLS, so no HTTP/2

	st, v := connectCall(t, hc, s, "Put", "", `{"topic":"t","id":"j1","body":"aGVsbG8=","delay":"3600s","priority":7}`)
	if st != 200 || v["id"] != "j1" || v["seq"] == nil {
		t.Fatalf("put: %d %v", st, v)
	}
	st, v = connectCall(t, hc, s, "Get", "", `{"id":"j1"}`)
	job, _ := v["job"].(map[string]any)
	if st != 200 || job["state"] != "delayed" || job["body"] != "aGVsbG8=" || job["priority"] != 7.0 || job["ttr"] != "60s" {
		t.Fatalf("get: %d %v", st, v)
	}
	// An update that sets the body to empty clears it (presence, not
	// emptiness, says whether to change it), and makes it ready now.
	st, v = connectCall(t, hc, s, "Update", "", `{"id":"j1","body":"","delay":"0s"}`)
	job, _ = v["job"].(map[string]any)
	if _, has := job["body"]; st != 200 || has || job["state"] != "ready" {
		t.Fatalf("update: %d %v", st, v)
	}
	st, v = connectCall(t, hc, s, "Reserve", "", `{"topics":["t"],"n":5,"wait":"1s"}`)
	jobs, _ := v["jobs"].([]any)
	if st != 200 || len(jobs) != 1 {
		t.Fatalf("reserve: %d %v", st, v)
	}
	res := jobs[0].(map[string]any)["reservation"].(string)
	st, v = connectCall(t, hc, s, "FinishBatch", "", `{"jobs":[{"id":"j1","reservation":"`+res+`"},{"id":"nope","reservation":"`+res+`"}]}`)
	results, _ := v["results"].([]any)
	if st != 200 || len(results) != 2 || results[0].(map[string]any)["ok"] != true ||
		results[1].(map[string]any)["error"].(map[string]any)["code"] != delayq.CodeNotFound {
		t.Fatalf("finish batch: %d %v", st, v)
	}

	// Errors: the Connect status and the ErrorInfo detail.
	for _, c := range []struct {
		method, body string
		status       int
		connect      string
		code         string
	}{
		{"Put", `{"topic":"t","id":"bad id"}`, 400, "invalid_argument", delayq.CodeBadID},
		{"Put", `{"topic":"t","id":"x","delay":"-1s"}`, 400, "invalid_argument", delayq.CodeBadDelay},
		{"Get", `{"id":"gone"}`, 404, "not_found", delayq.CodeNotFound},
		{"Finish", `{"id":"gone","reservation":"1-1"}`, 404, "not_found", delayq.CodeNotFound},
		{"Reserve", `{"topics":["t"],"n":5000}`, 400, "invalid_argument", delayq.CodeBadN},
	} {
		st, v := connectCall(t, hc, s, c.method, "", c.body)
		details, _ := v["details"].([]any)
		var info map[string]any
		if len(details) == 1 {
			d := details[0].(map[string]any)
			if d["type"] == "delayq.v1.ErrorInfo" {
				info, _ = d["debug"].(map[string]any)
			}
		}
		if st != c.status || v["code"] != c.connect || info["code"] != c.code || info["message"] != v["message"] {
			t.Errorf("%s %s: %d %v, want %d %s with ErrorInfo %s", c.method, c.body, st, v, c.status, c.connect, c.code)
		}
	}
	// A body that is not this message is refused by the protocol layer,
	// and nothing is put.
	if st, v := connectCall(t, hc, s, "Put", "", `{"topic":"t","id":"z","bogus":1}`); st != 400 || v["code"] != "invalid_argument" {
		t.Errorf("put with an unknown field: %d %v", st, v)
	}
	if _, err := s.Engine().Get(t.Context(), delayq.Ref{ID: "z"}); err == nil {
		t.Error("the refused put stored its job")
	}
}

// TestGRPCWeb: a gRPC-Web client (what a browser library sends: HTTP/1.1,
// application/grpc-web+proto, the status in a trailer frame) is served
// too.
func TestGRPCWeb(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t), &syncBuffer{})
	msg, _ := proto.Marshal(&delayqv1.PutRequest{Topic: "t", Id: "w1", Body: []byte("x")})
	frame := append([]byte{0, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(frame[1:5], uint32(len(msg)))
	req, _ := http.NewRequest("POST", s.URL()+"/delayq.v1.DelayQService/Put", bytes.NewReader(frame))
	req.Header.Set("Content-Type", "application/grpc-web+proto")
	resp, err := plainClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var got delayqv1.PutResponse
	var trailer string
	for len(b) >= 5 {
		n := binary.BigEndian.Uint32(b[1:5])
		data := b[5 : 5+n]
		if b[0]&0x80 != 0 {
			trailer = string(data)
		} else if err := proto.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		b = b[5+n:]
	}
	if resp.StatusCode != 200 || got.Id != "w1" || !strings.Contains(strings.ToLower(trailer), "grpc-status: 0") {
		t.Fatalf("grpc-web put: %d %v, trailer %q", resp.StatusCode, &got, trailer)
	}
}

// TestGRPCOverTLS: with TLS on, the HTTP port offers HTTP/2 by ALPN, so
// grpc-go connects over TLS; a client certificate names its principal as
// over HTTP, and a token in the authorization metadata does too.
func TestGRPCOverTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "server", "localhost")
	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = cert, key, ca.File
	cfg.AdvertiseURL = ""
	s := startServer(t, cfg, &syncBuffer{})

	tc, err := tlsconf.ClientConfig(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	tc.ServerName = "localhost"
	conn := grpcConn(t, s, grpc.WithTransportCredentials(credentials.NewTLS(tc)))
	ctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer shop-token")
	var p peer.Peer
	if err := invoke(ctx, conn, "Put", &delayqv1.PutRequest{Topic: "orders", Id: "o1"}, &delayqv1.PutResponse{}, grpc.Peer(&p)); err != nil {
		t.Fatal(err)
	}
	if ti, ok := p.AuthInfo.(credentials.TLSInfo); !ok || ti.State.NegotiatedProtocol != "h2" {
		t.Fatalf("the call's connection: %#v, want TLS with ALPN h2", p.AuthInfo)
	}
	if st := status.Convert(invoke(t.Context(), conn, "Put", &delayqv1.PutRequest{Topic: "orders"}, &delayqv1.PutResponse{})); st.Code() != codes.Unauthenticated {
		t.Fatalf("put without a token over TLS = %v", st)
	}

	// The worker's client certificate is its principal: it may reserve
	// orders, and may not put.
	wc, wk := ca.Issue(t, "worker-1", "worker-1")
	pair, err := tls.LoadX509KeyPair(wc, wk)
	if err != nil {
		t.Fatal(err)
	}
	mtc := tc.Clone()
	mtc.Certificates = []tls.Certificate{pair}
	worker := grpcConn(t, s, grpc.WithTransportCredentials(credentials.NewTLS(mtc)))
	var res delayqv1.ReserveResponse
	if err := invoke(t.Context(), worker, "Reserve", &delayqv1.ReserveRequest{Topics: []string{"orders"}}, &res); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("the worker's reserve by certificate = %v, %v", &res, err)
	}
	if st := status.Convert(invoke(t.Context(), worker, "Put", &delayqv1.PutRequest{Topic: "orders"}, &delayqv1.PutResponse{})); st.Code() != codes.PermissionDenied {
		t.Fatalf("the worker's put = %v, want permission denied", st)
	}

	// HTTP/1.1 clients over TLS are served as before.
	tr := &http.Transport{TLSClientConfig: tc.Clone()}
	t.Cleanup(tr.CloseIdleConnections)
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://localhost:" + portOf(s) + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("healthz over TLS: %d %s", resp.StatusCode, resp.Proto)
	}
}

func portOf(s *Server) string {
	a := s.Addr().String()
	return a[strings.LastIndexByte(a, ':')+1:]
}

// TestShutdownEndsGRPCLongPoll: a gRPC reserve waiting on an HTTP/2
// stream when the server shuts down gets its answer (no jobs) at once,
// not after its wait, and the shutdown completes.
func TestShutdownEndsGRPCLongPoll(t *testing.T) {
	t.Parallel()
	s := New(testConfig(t), slog.New(slog.DiscardHandler))
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	conn := grpcConn(t, s)
	errc := make(chan error, 1)
	var res delayqv1.ReserveResponse
	start := time.Now()
	go func() {
		errc <- invoke(t.Context(), conn, "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, Wait: durationpb.New(4 * time.Minute)}, &res)
	}()
	waitUntil(t, "the reserve waits", func() bool { return s.Engine().Waiting("t") == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	if err := <-errc; err != nil || len(res.Jobs) != 0 {
		t.Fatalf("the waiting reserve = %v, %v; want no jobs and no error", &res, err)
	}
	if d := time.Since(start); d > time.Minute {
		t.Fatalf("the reserve ended after %s: it waited out its wait", d)
	}
}

// TestGRPCRefusesCrossSitePages: a page of another site cannot make the
// operator's browser call the gRPC API (gRPC-Web and Connect are
// reachable from a page): the request is refused and nothing is put.
func TestGRPCRefusesCrossSitePages(t *testing.T) {
	t.Parallel()
	s := startServer(t, testConfig(t), &syncBuffer{})
	req, _ := http.NewRequest("POST", s.URL()+"/delayq.v1.DelayQService/Put", strings.NewReader(`{"topic":"t","id":"x"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Sec-Fetch-Site", "cross-site")
	resp, err := plainClient(t).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a cross-site put: %d, want 403", resp.StatusCode)
	}
	if _, err := s.Engine().Get(t.Context(), delayq.Ref{ID: "x"}); err == nil {
		t.Fatal("the cross-site put stored its job")
	}
}
