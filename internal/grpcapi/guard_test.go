package grpcapi

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/limits"
)

// logBuffer is a bytes.Buffer safe for a logger's concurrent writes.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// withToken is ctx carrying the authorization metadata of token.
func withToken(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// TestScopes: each method needs the scope its HTTP route needs, checked
// on the topic the call names, or on the topic of the job it names; a
// call without a valid token is Unauthenticated. Every refusal is
// answered before anything changes.
func TestScopes(t *testing.T) {
	t.Parallel()
	inline := fmt.Sprintf(`{"tokens":[
	  {"name":"shop","sha256":%q,"scopes":["produce"],"topics":["order*"]},
	  {"name":"worker","sha256":%q,"scopes":["consume"],"topics":["order*"]},
	  {"name":"reader","sha256":%q,"scopes":["read"],"topics":["order*"]},
	  {"name":"ops","sha256":%q,"scopes":["admin"]}]}`,
		auth.HashToken("shop-token"), auth.HashToken("worker-token"), auth.HashToken("reader-token"), auth.HashToken("ops-token"))
	store, err := auth.Load("", inline)
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, Options{Auth: store})
	ops := withToken(t.Context(), "ops-token")
	for _, id := range []string{"o-held", "o-ready"} { // o-held first: the reserve takes it
		if err := a.call(ops, "Put", &delayqv1.PutRequest{Topic: "orders", Id: id}, &delayqv1.PutResponse{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.call(ops, "Put", &delayqv1.PutRequest{Topic: "mail", Id: "m1"}, &delayqv1.PutResponse{}); err != nil {
		t.Fatal(err)
	}
	var res delayqv1.ReserveResponse
	if err := a.call(withToken(t.Context(), "worker-token"), "Reserve", &delayqv1.ReserveRequest{Topics: []string{"orders"}}, &res); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("worker's reserve = %v, %v", &res, err)
	}
	held := res.Jobs[0]

	for _, c := range []struct {
		name, token, method string
		in                  proto.Message
		status              codes.Code
		code                string
	}{
		{"no token", "", "Put", &delayqv1.PutRequest{Topic: "orders"}, codes.Unauthenticated, delayq.CodeUnauthorized},
		{"unknown token", "nope", "Get", &delayqv1.GetRequest{Id: "o-ready"}, codes.Unauthenticated, delayq.CodeUnauthorized},
		{"producer elsewhere", "shop-token", "Put", &delayqv1.PutRequest{Topic: "mail"}, codes.PermissionDenied, delayq.CodeForbidden},
		{"producer batch elsewhere", "shop-token", "PutBatch", &delayqv1.PutBatchRequest{Topic: "mail", Jobs: []*delayqv1.PutJob{{}}}, codes.PermissionDenied, delayq.CodeForbidden},
		{"producer reserving", "shop-token", "Reserve", &delayqv1.ReserveRequest{Topics: []string{"orders"}}, codes.PermissionDenied, delayq.CodeForbidden},
		{"consumer reserving elsewhere", "worker-token", "Reserve", &delayqv1.ReserveRequest{Topics: []string{"orders", "mail"}}, codes.PermissionDenied, delayq.CodeForbidden},
		{"consumer deleting", "worker-token", "Delete", &delayqv1.DeleteRequest{Id: "o-ready"}, codes.PermissionDenied, delayq.CodeForbidden},
		{"consumer kicking", "worker-token", "Kick", &delayqv1.KickRequest{Id: "o-ready"}, codes.PermissionDenied, delayq.CodeForbidden},
		{"consumer updating", "worker-token", "Update", &delayqv1.UpdateRequest{Id: "o-ready", Priority: proto.Uint32(1)}, codes.PermissionDenied, delayq.CodeForbidden},
		{"producer kicking a topic", "shop-token", "KickTopic", &delayqv1.KickTopicRequest{Topic: "orders", N: 1}, codes.PermissionDenied, delayq.CodeForbidden},
		{"producer finishing", "shop-token", "Finish", &delayqv1.FinishRequest{Id: "o-held", Reservation: held.Reservation}, codes.PermissionDenied, delayq.CodeForbidden},
		{"reader finishing", "reader-token", "Finish", &delayqv1.FinishRequest{Id: "o-held", Reservation: held.Reservation}, codes.PermissionDenied, delayq.CodeForbidden},
		{"reader listing elsewhere", "reader-token", "List", &delayqv1.ListRequest{Topic: "mail"}, codes.PermissionDenied, delayq.CodeForbidden},
		{"reader reading a job elsewhere", "reader-token", "Get", &delayqv1.GetRequest{Id: "m1"}, codes.PermissionDenied, delayq.CodeForbidden},
		{"producer revoking a job elsewhere", "shop-token", "Delete", &delayqv1.DeleteRequest{Id: "m1"}, codes.PermissionDenied, delayq.CodeForbidden},
		{"consumer touching a job elsewhere", "worker-token", "Touch", &delayqv1.TouchRequest{Id: "m1", Reservation: "x"}, codes.PermissionDenied, delayq.CodeForbidden},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := t.Context()
			if c.token != "" {
				ctx = withToken(ctx, c.token)
			}
			st, info := errInfo(t, a.call(ctx, c.method, c.in, newOut(c.method)))
			if st.Code() != c.status || info.Code != c.code {
				t.Errorf("%s = %v %v, want %v %s", c.method, st.Code(), info, c.status, c.code)
			}
		})
	}
	// Nothing changed: the held job is still held as it was, the others
	// are where they were.
	for id, state := range map[string]delayq.State{"o-ready": delayq.StateReady, "o-held": delayq.StateReserved, "m1": delayq.StateReady} {
		j, err := a.e.Get(context.Background(), delayq.Ref{ID: id})
		if err != nil || j.State != state || j.Priority != delayq.DefaultPriority {
			t.Errorf("job %s after the refusals = %+v, %v; want %s", id, j, err, state)
		}
	}

	// Allowed: each scope on its own topic.
	var get delayqv1.GetResponse
	if err := a.call(withToken(t.Context(), "reader-token"), "Get", &delayqv1.GetRequest{Id: "o-held"}, &get); err != nil {
		t.Fatal(err)
	}
	if get.Job.State != "reserved" || get.Job.Reservation != "" {
		t.Errorf("a reader sees %v; the reservation must be hidden from a token that may not consume", get.Job)
	}
	var list delayqv1.ListResponse
	if err := a.call(withToken(t.Context(), "reader-token"), "List", &delayqv1.ListRequest{Topic: "orders", State: "reserved"}, &list); err != nil || len(list.Jobs) != 1 || list.Jobs[0].Reservation != "" {
		t.Errorf("a reader's list = %v, %v; want the held job without its reservation", &list, err)
	}
	if err := a.call(withToken(t.Context(), "worker-token"), "Get", &delayqv1.GetRequest{Id: "o-held"}, &get); err == nil {
		t.Errorf("a consumer without read got the job: %v", get.Job)
	}
	if err := a.call(withToken(t.Context(), "worker-token"), "Finish", &delayqv1.FinishRequest{Id: "o-held", Reservation: held.Reservation}, &delayqv1.FinishResponse{}); err != nil {
		t.Errorf("the holder's finish: %v", err)
	}
	if err := a.call(withToken(t.Context(), "shop-token"), "Delete", &delayqv1.DeleteRequest{Id: "o-ready"}, &delayqv1.DeleteResponse{}); err != nil {
		t.Errorf("the producer's revoke of its job: %v", err)
	}
}

// TestLimits: the token's request rate, the bytes in flight and the Host
// names bound gRPC calls as they bound HTTP requests, each refusal with
// its code.
func TestLimits(t *testing.T) {
	t.Parallel()
	t.Run("rate", func(t *testing.T) {
		t.Parallel()
		a := newAPI(t, Options{Rates: limits.NewRates(0.001, 1)})
		if err := a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "x"}, &delayqv1.GetResponse{}); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("first call = %v, want not found (let through)", err)
		}
		st, info := errInfo(t, a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "x"}, &delayqv1.GetResponse{}))
		if st.Code() != codes.ResourceExhausted || info.Code != delayq.CodeRateLimited {
			t.Fatalf("second call = %v %v, want resource exhausted rate_limited", st.Code(), info)
		}
	})
	t.Run("bytes in flight", func(t *testing.T) {
		t.Parallel()
		b := limits.NewBytes(64<<10, 0)
		a := newAPI(t, Options{Bytes: b})
		hold := b.Open() // another request holds the whole budget
		if err := hold.Take(t.Context(), 64<<10); err != nil {
			t.Fatal(err)
		}
		st, info := errInfo(t, a.call(t.Context(), "Put", &delayqv1.PutRequest{Topic: "t", Id: "a", Body: []byte("x")}, &delayqv1.PutResponse{}))
		if st.Code() != codes.ResourceExhausted || info.Code != delayq.CodeTooManyBytes {
			t.Fatalf("put over the budget = %v %v, want resource exhausted %s", st.Code(), info, delayq.CodeTooManyBytes)
		}
		if _, err := a.e.Get(context.Background(), delayq.Ref{ID: "a"}); err == nil {
			t.Fatal("the refused put stored its job")
		}
		hold.Close()
		if err := a.call(t.Context(), "Put", &delayqv1.PutRequest{Topic: "t", Id: "a", Body: []byte("x")}, &delayqv1.PutResponse{}); err != nil {
			t.Fatalf("put once the budget is free: %v", err)
		}
		waitFor(t, func() bool { return b.InFlight() == 0 }) // every charge given back
	})
	t.Run("host", func(t *testing.T) {
		t.Parallel()
		a := newAPI(t, Options{Hosts: func(h string) bool { return !strings.HasPrefix(h, "evil.example") }})
		st, info := errInfo(t, a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "x"}, &delayqv1.GetResponse{}, grpc.CallAuthority("evil.example")))
		if st.Code() != codes.PermissionDenied || info.Code != delayq.CodeHostNotAllowed {
			t.Fatalf("call to another Host = %v %v", st.Code(), info)
		}
	})
}

// TestAuditAndAccessLog: an operator's changes over gRPC (delete, update,
// kick, topic kick) write the audit records the HTTP API writes, with
// protocol "grpc", refused ones too; with AccessLog every call writes an
// access record; every call is counted in the duration histogram by
// procedure and status.
func TestAuditAndAccessLog(t *testing.T) {
	t.Parallel()
	logs := &logBuffer{}
	a := newAPI(t, Options{Logger: slog.New(slog.NewTextHandler(logs, nil)), AccessLog: true})
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "a", Body: []byte("x")}, &delayqv1.PutResponse{})
	a.must("Delete", &delayqv1.DeleteRequest{Id: "a"}, &delayqv1.DeleteResponse{})
	if err := a.call(t.Context(), "Delete", &delayqv1.DeleteRequest{Id: "a"}, &delayqv1.DeleteResponse{}); err == nil {
		t.Fatal("second delete succeeded")
	}
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "d", Body: []byte("x"), Delay: durationpb.New(time.Hour)}, &delayqv1.PutResponse{})
	a.must("Update", &delayqv1.UpdateRequest{Id: "d", Priority: proto.Uint32(1)}, &delayqv1.UpdateResponse{})
	a.must("Kick", &delayqv1.KickRequest{Id: "d"}, &delayqv1.KickResponse{})
	a.must("KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: 5}, &delayqv1.KickTopicResponse{})
	out := logs.String()
	for _, want := range []string{
		"audit=true action=job.delete target=job:a outcome=ok principal=open protocol=grpc",
		"audit=true action=job.delete target=job:a outcome=not_found principal=open protocol=grpc",
		"audit=true action=job.update target=job:d outcome=ok principal=open protocol=grpc",
		"audit=true action=job.kick target=job:d outcome=ok principal=open protocol=grpc",
		"audit=true action=topic.kick target=topic:t outcome=ok principal=open protocol=grpc",
		"kicked=0",
		`msg="grpc request" access=true procedure=/delayq.v1.DelayQService/Put protocol=grpc status=ok`,
		`procedure=/delayq.v1.DelayQService/Delete protocol=grpc status=not_found code=not_found`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "action=put") || strings.Count(out, "audit=true") != 5 {
		t.Errorf("want exactly the 5 audit records (puts are the hot path, not audited):\n%s", out)
	}
	// One series per procedure and status: Put ok, Delete ok and
	// not_found, Update, Kick and KickTopic ok (observed once the answer
	// is written).
	waitFor(t, func() bool {
		return testutil.CollectAndCount(a.e.Metrics().Registry, "delayq_grpc_request_duration_seconds") == 6
	})
}

// TestCompressedRequestRefused: a gzip-compressed request is refused
// before it is decompressed (its decoded size would escape the bytes
// budget, which charges bytes as they arrive), and nothing is put.
func TestCompressedRequestRefused(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	err := a.call(t.Context(), "Put", &delayqv1.PutRequest{Topic: "t", Id: "z", Body: make([]byte, 60<<10)}, &delayqv1.PutResponse{},
		grpc.UseCompressor(gzip.Name))
	if status.Code(err) != codes.Unimplemented {
		t.Fatalf("compressed put = %v, want unimplemented", err)
	}
	if _, err := a.e.Get(context.Background(), delayq.Ref{ID: "z"}); err == nil {
		t.Fatal("the refused put stored its job")
	}
}
