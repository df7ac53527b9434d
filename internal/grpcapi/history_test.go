package grpcapi

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// TestHistoryAndRetention: over gRPC, as over HTTP, a job carries its
// attempts (who reserved it, how each ended, the reason), a finished job
// stays readable as state finished with ended_at while it is retained,
// the retained state lists, and a put of its id again is ALREADY_EXISTS
// with the retained state in ErrorInfo.state.
func TestHistoryAndRetention(t *testing.T) {
	t.Parallel()
	// memstore, the reference model: the history contract is the same for
	// every store (the conformance suite's History group).
	a := startAPI(t, memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour, Bodies: true}}), Options{})
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "h", Body: []byte("x")}, &delayqv1.PutResponse{})
	var res delayqv1.ReserveResponse
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res)
	a.must("Release", &delayqv1.ReleaseRequest{Id: "h", Reservation: res.Jobs[0].Reservation, Reason: "db down", Delay: durationpb.New(0)}, &delayqv1.ReleaseResponse{})
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res)
	var fin, again delayqv1.FinishResponse
	a.must("Finish", &delayqv1.FinishRequest{Id: "h", Reservation: res.Jobs[0].Reservation}, &fin)
	if fin.Job.State != string(delayq.StateFinished) || fin.Job.EndedAt == nil || fin.Job.Reservation != "" {
		t.Errorf("finish answered %v, want the job as it now is: finished", fin.Job)
	}
	// Sent again (its answer lost): success, the job as it now is.
	a.must("Finish", &delayqv1.FinishRequest{Id: "h", Reservation: res.Jobs[0].Reservation}, &again)
	if again.Job.State != string(delayq.StateFinished) || !again.Job.EndedAt.AsTime().Equal(fin.Job.EndedAt.AsTime()) {
		t.Errorf("finish sent again answered %v, want the finished job", again.Job)
	}

	var got delayqv1.GetResponse
	a.must("Get", &delayqv1.GetRequest{Id: "h"}, &got)
	j := got.Job
	if j.State != string(delayq.StateFinished) || j.EndedAt == nil || len(j.History) != 2 {
		t.Fatalf("the finished job = %v", j)
	}
	h0, h1 := j.History[0], j.History[1]
	if h0.Attempt != 1 || h0.Outcome != "released" || h0.Reason != "db down" || !strings.HasPrefix(h0.By, "grpc 127.0.0.1:") || h0.ReservedAt == nil || h0.EndedAt == nil ||
		h1.Attempt != 2 || h1.Outcome != "finished" {
		t.Fatalf("history = %v", j.History)
	}
	var list delayqv1.ListResponse
	a.must("List", &delayqv1.ListRequest{Topic: "t", State: "finished"}, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].Id != "h" {
		t.Fatalf("list finished = %v", &list)
	}

	// With tokens, an attempt names the principal that reserved it.
	store, err := auth.Load("", fmt.Sprintf(`{"tokens":[{"name":"worker","sha256":%q,"scopes":["produce","consume"]}]}`, auth.HashToken("w")))
	if err != nil {
		t.Fatal(err)
	}
	b := startAPI(t, memstore.Open(memstore.Options{}), Options{Auth: store})
	ctx := withToken(t.Context(), "w")
	if err := b.call(ctx, "Put", &delayqv1.PutRequest{Topic: "t", Id: "p"}, &delayqv1.PutResponse{}); err != nil {
		t.Fatal(err)
	}
	if err := b.call(ctx, "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res); err != nil || len(res.Jobs) != 1 ||
		len(res.Jobs[0].History) != 1 || res.Jobs[0].History[0].By != "worker" {
		t.Fatalf("reserve with a token = %v, %v; want its attempt by worker", &res, err)
	}

	st2, info := errInfo(t, a.call(t.Context(), "Put", &delayqv1.PutRequest{Topic: "t", Id: "h"}, &delayqv1.PutResponse{}))
	if st2.Code() != codes.AlreadyExists || info.Code != delayq.CodeExists || info.State != string(delayq.StateFinished) {
		t.Fatalf("put of a finished id = %v %v, want already exists with state finished", st2.Code(), info)
	}
}
