package grpcapi

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/store/diskstore"
	"github.com/delayq/delayq/internal/store/storetest"
)

// TestPutReserveFinish: a job put over gRPC comes back whole from a
// reserve (a body that is not UTF-8 included, defaults filled in as over
// HTTP), and a finish with its reservation ends it.
func TestPutReserveFinish(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	body := []byte{0xff, 0x00, 'x'}
	var put delayqv1.PutResponse
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "a", Body: body, Priority: proto.Uint32(5)}, &put)
	if put.Id != "a" || put.Seq == 0 {
		t.Fatalf("put = %v", &put)
	}
	var res delayqv1.ReserveResponse
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res)
	if len(res.Jobs) != 1 {
		t.Fatalf("reserve = %v", &res)
	}
	j := res.Jobs[0]
	if j.Id != "a" || j.Seq != put.Seq || !bytes.Equal(j.Body, body) || j.Priority != 5 || j.State != "reserved" ||
		j.Attempts != 1 || j.Ttr.AsDuration() != delayq.DefaultTTR || j.Reservation == "" || j.Deadline == nil {
		t.Fatalf("reserved job = %v", j)
	}
	var fin delayqv1.FinishResponse
	a.must("Finish", &delayqv1.FinishRequest{Id: "a", Reservation: j.Reservation}, &fin)
	if fin.Job.GetId() != "a" {
		t.Fatalf("finish = %v", &fin)
	}
	err := a.call(t.Context(), "Get", &delayqv1.GetRequest{Id: "a"}, &delayqv1.GetResponse{})
	if st, info := errInfo(t, err); st.Code() != codes.NotFound || info.Code != delayq.CodeNotFound {
		t.Fatalf("get after finish = %v %v", st, info)
	}
}

// TestReserveWaitsForLaterPut: a reserve with a wait parks until a job is
// put, then answers it.
func TestReserveWaitsForLaterPut(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	got := make(chan *delayqv1.ReserveResponse, 1)
	errc := make(chan error, 1)
	go func() {
		var res delayqv1.ReserveResponse
		err := a.call(t.Context(), "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, N: 2, Wait: durationpb.New(time.Minute)}, &res)
		errc <- err
		got <- &res
	}()
	waitFor(t, func() bool { return a.e.Waiting("t") == 1 })
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "late", Body: []byte("x")}, &delayqv1.PutResponse{})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if res := <-got; len(res.Jobs) != 1 || res.Jobs[0].Id != "late" {
		t.Fatalf("reserve = %v", res)
	}
}

// TestCancelledReserveGivesJobBack: a gRPC client that cancels its
// waiting reserve just after the store reserved a max_attempts=1 job for
// it leaves the job ready with no attempt spent, and the next consumer
// gets it on its first attempt.
func TestCancelledReserveGivesJobBack(t *testing.T) {
	t.Parallel()
	st, err := diskstore.Open(t.TempDir(), diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	gate := storetest.NewHangUpGate(st)
	gate.Armed.Store(true)
	a := startAPI(t, gate, Options{})

	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		var res delayqv1.ReserveResponse
		err := a.call(ctx, "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, Wait: durationpb.New(5 * time.Minute)}, &res)
		if err == nil {
			err = errNoAnswer
		}
		errc <- err
	}()
	waitFor(t, func() bool { return a.e.Waiting("t") == 1 })
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "a", MaxAttempts: proto.Int32(1)}, &delayqv1.PutResponse{})
	select {
	case <-gate.Reserved:
	case <-time.After(5 * time.Second):
		t.Fatal("the waiting reserve did not reserve the job put meanwhile")
	}
	cancel() // the client cancels; the store has reserved its job
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Errorf("client error = %v, want canceled", err)
	}
	var j *delayq.Job
	waitFor(t, func() bool {
		j, err = a.e.Get(context.Background(), delayq.Ref{ID: "a"})
		return err != nil || j.State != delayq.StateReserved
	})
	if err != nil || j.State != delayq.StateReady || j.Attempts != 0 || j.Releases != 0 || j.Buries != 0 {
		t.Fatalf("job after its consumer cancelled = %+v, %v; want ready with attempts 0, no release, no bury", j, err)
	}
	var res delayqv1.ReserveResponse
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res)
	if len(res.Jobs) != 1 || res.Jobs[0].Id != "a" || res.Jobs[0].Attempts != 1 {
		t.Fatalf("next consumer's reserve = %v, want job a on its first attempt", &res)
	}
}

// TestErrors: each bad call answers its status code with the delayq code
// in an ErrorInfo detail, as HTTP answers the same call its status and
// code, and changes nothing.
func TestErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "held", Body: []byte("x")}, &delayqv1.PutResponse{})
	a.must("Put", &delayqv1.PutRequest{Topic: "t", Id: "ready", Body: []byte("x"), Priority: proto.Uint32(2000)}, &delayqv1.PutResponse{})
	var res delayqv1.ReserveResponse
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res)
	if len(res.Jobs) != 1 || res.Jobs[0].Id != "held" {
		t.Fatalf("reserve = %v", &res)
	}
	held := res.Jobs[0]
	maxBody := a.e.Config().MaxBody

	snapshot := func() string {
		var b strings.Builder
		for _, id := range []string{"held", "ready"} {
			j, err := a.e.Get(context.Background(), delayq.Ref{ID: id})
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(j.ID + ":" + string(j.State) + ":" + string(j.Body) + ":" + j.Due.String() + ":" + j.Reservation + ":" + j.Deadline.String() + ";")
		}
		topics, err := a.e.Topics(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, tp := range topics {
			b.WriteString(tp.Name + ";")
		}
		return b.String()
	}
	before := snapshot()

	for _, c := range []struct {
		name   string
		method string
		in     proto.Message
		status codes.Code
		code   string
	}{
		{"put bad id", "Put", &delayqv1.PutRequest{Topic: "t", Id: "a b"}, codes.InvalidArgument, delayq.CodeBadID},
		{"put no topic", "Put", &delayqv1.PutRequest{Id: "x"}, codes.InvalidArgument, delayq.CodeBadTopic},
		{"put body too big", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", Body: make([]byte, maxBody+1)}, codes.InvalidArgument, delayq.CodeBodyTooBig},
		{"put request too large", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", Body: make([]byte, maxBody+perJobOverhead+1)}, codes.ResourceExhausted, delayq.CodeRequestTooLarge},
		{"put delay not a duration", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", Delay: &durationpb.Duration{Seconds: 1, Nanos: -1}}, codes.InvalidArgument, delayq.CodeBadDelay},
		{"put delay too large", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", Delay: &durationpb.Duration{Seconds: 300 * 366 * 86400}}, codes.InvalidArgument, delayq.CodeBadDelay},
		{"put negative delay", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", Delay: durationpb.New(-time.Second)}, codes.InvalidArgument, delayq.CodeBadDelay},
		{"put ttr under 1s", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", Ttr: durationpb.New(time.Millisecond)}, codes.InvalidArgument, delayq.CodeBadTTR},
		{"put at before 1970", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", At: timestamppb.New(time.Date(1960, 1, 1, 0, 0, 0, 0, time.UTC))}, codes.InvalidArgument, delayq.CodeBadAt},
		{"put at not a time", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", At: &timestamppb.Timestamp{Seconds: 1, Nanos: 2e9}}, codes.InvalidArgument, delayq.CodeBadAt},
		{"put negative max_attempts", "Put", &delayqv1.PutRequest{Topic: "t", Id: "x", MaxAttempts: proto.Int32(-1)}, codes.InvalidArgument, delayq.CodeBadMaxAttempts},
		{"put live id", "Put", &delayqv1.PutRequest{Topic: "t", Id: "ready"}, codes.AlreadyExists, delayq.CodeExists},
		{"batch empty", "PutBatch", &delayqv1.PutBatchRequest{Topic: "t"}, codes.InvalidArgument, delayq.CodeBadBatch},
		{"batch too big", "PutBatch", &delayqv1.PutBatchRequest{Topic: "t", Jobs: make([]*delayqv1.PutJob, delayq.MaxBatch+1)}, codes.InvalidArgument, delayq.CodeBatchTooBig},
		{"batch with a bad job", "PutBatch", &delayqv1.PutBatchRequest{Topic: "t", Jobs: []*delayqv1.PutJob{{Id: "ok1"}, {Id: "bad id"}}}, codes.InvalidArgument, delayq.CodeBadID},
		{"batch with a live id", "PutBatch", &delayqv1.PutBatchRequest{Topic: "t", Jobs: []*delayqv1.PutJob{{Id: "ok2"}, {Id: "held"}}}, codes.AlreadyExists, delayq.CodeExists},
		{"reserve no topics", "Reserve", &delayqv1.ReserveRequest{}, codes.InvalidArgument, delayq.CodeBadTopics},
		{"reserve bad n", "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, N: delayq.MaxReserveN + 1}, codes.InvalidArgument, delayq.CodeBadN},
		{"reserve negative wait", "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, Wait: durationpb.New(-time.Second)}, codes.InvalidArgument, delayq.CodeBadWait},
		{"reserve wait too long", "Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, Wait: durationpb.New(24 * time.Hour)}, codes.InvalidArgument, delayq.CodeWaitTooLong},
		{"finish no reservation", "Finish", &delayqv1.FinishRequest{Id: "held"}, codes.InvalidArgument, delayq.CodeBadReservation},
		{"finish stale reservation", "Finish", &delayqv1.FinishRequest{Id: "held", Reservation: held.Reservation + "0"}, codes.FailedPrecondition, delayq.CodeNotReserved},
		{"finish unknown job", "Finish", &delayqv1.FinishRequest{Id: "nope", Reservation: held.Reservation}, codes.NotFound, delayq.CodeNotFound},
		{"finish no id", "Finish", &delayqv1.FinishRequest{Reservation: held.Reservation}, codes.InvalidArgument, delayq.CodeBadID},
		{"release too long a reason", "Release", &delayqv1.ReleaseRequest{Id: "held", Reservation: held.Reservation, Reason: strings.Repeat("x", 1025)}, codes.InvalidArgument, delayq.CodeBadReason},
		{"touch stale reservation", "Touch", &delayqv1.TouchRequest{Id: "held", Reservation: "1-1"}, codes.FailedPrecondition, delayq.CodeNotReserved},
		{"bury not reserved", "Bury", &delayqv1.BuryRequest{Id: "ready", Reservation: held.Reservation}, codes.FailedPrecondition, delayq.CodeNotReserved},
		{"kick a ready job", "Kick", &delayqv1.KickRequest{Id: "ready"}, codes.FailedPrecondition, delayq.CodeBadState},
		{"kick topic negative n", "KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: -1}, codes.InvalidArgument, delayq.CodeBadN},
		{"kick topic n too large", "KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: 1 << 32}, codes.InvalidArgument, delayq.CodeBadN},
		{"kick topic of ready jobs", "KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: 1, State: "ready"}, codes.InvalidArgument, delayq.CodeBadState},
		{"get bad id", "Get", &delayqv1.GetRequest{Id: "a/b"}, codes.InvalidArgument, delayq.CodeBadID},
		{"get no id", "Get", &delayqv1.GetRequest{}, codes.InvalidArgument, delayq.CodeBadID},
		{"update a reserved job", "Update", &delayqv1.UpdateRequest{Id: "held", Body: []byte("y")}, codes.FailedPrecondition, delayq.CodeNotReserved},
		{"update delay and at", "Update", &delayqv1.UpdateRequest{Id: "ready", Delay: durationpb.New(time.Hour), At: timestamppb.Now()}, codes.InvalidArgument, delayq.CodeBadDelay},
		{"update body too big", "Update", &delayqv1.UpdateRequest{Id: "ready", Body: make([]byte, maxBody+1)}, codes.InvalidArgument, delayq.CodeBodyTooBig},
		{"delete unknown", "Delete", &delayqv1.DeleteRequest{Id: "nope"}, codes.NotFound, delayq.CodeNotFound},
		{"list bad state", "List", &delayqv1.ListRequest{Topic: "t", State: "gone"}, codes.InvalidArgument, delayq.CodeBadState},
		{"list bad limit", "List", &delayqv1.ListRequest{Topic: "t", Limit: 5000}, codes.InvalidArgument, delayq.CodeBadLimit},
		{"list bad cursor", "List", &delayqv1.ListRequest{Topic: "t", Cursor: "!!"}, codes.InvalidArgument, delayq.CodeBadCursor},
		{"list bad topic", "List", &delayqv1.ListRequest{Topic: "-t"}, codes.InvalidArgument, delayq.CodeBadTopic},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := newOut(c.method)
			err := a.call(t.Context(), c.method, c.in, out)
			st, info := errInfo(t, err)
			if st.Code() != c.status || info.Code != c.code || info.Message == "" || st.Message() != info.Message {
				t.Errorf("%s = %v %v (message %q), want %v %s", c.method, st.Code(), info, st.Message(), c.status, c.code)
			}
			if now := snapshot(); now != before {
				t.Errorf("the call changed state:\nbefore %s\nafter  %s", before, now)
			}
		})
	}
}

// newOut is an empty answer message of method.
func newOut(method string) proto.Message {
	switch method {
	case "Put":
		return &delayqv1.PutResponse{}
	case "PutBatch":
		return &delayqv1.PutBatchResponse{}
	case "Reserve":
		return &delayqv1.ReserveResponse{}
	case "Finish":
		return &delayqv1.FinishResponse{}
	case "FinishBatch":
		return &delayqv1.FinishBatchResponse{}
	case "Release":
		return &delayqv1.ReleaseResponse{}
	case "Touch":
		return &delayqv1.TouchResponse{}
	case "Bury":
		return &delayqv1.BuryResponse{}
	case "Kick":
		return &delayqv1.KickResponse{}
	case "KickTopic":
		return &delayqv1.KickTopicResponse{}
	case "Get":
		return &delayqv1.GetResponse{}
	case "Update":
		return &delayqv1.UpdateResponse{}
	case "Delete":
		return &delayqv1.DeleteResponse{}
	case "List":
		return &delayqv1.ListResponse{}
	}
	panic("no method " + method)
}

// TestEveryMethod: each method of the service does over gRPC what its
// HTTP route does, on one job's life: release with a reason, touch, bury,
// kick, update, list, batch put and finish, topic kick, delete; then a
// put, get and finish of one more. As TestOpenAPI does for the HTTP
// routes, it ends by checking that every method of the .proto's service
// answered at least one call with success (read from the server's own
// delayq_grpc_request_duration_seconds), so a method added to the .proto
// cannot go unexercised here.
func TestEveryMethod(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	var batch delayqv1.PutBatchResponse
	a.must("PutBatch", &delayqv1.PutBatchRequest{Topic: "t", Jobs: []*delayqv1.PutJob{
		{Id: "a", Body: []byte("1")}, {Id: "b", Body: []byte("2"), Delay: durationpb.New(time.Hour)}, {Body: []byte("3")},
	}}, &batch)
	if len(batch.Jobs) != 3 || batch.Jobs[0].Id != "a" || batch.Jobs[2].Id == "" {
		t.Fatalf("batch = %v", &batch)
	}
	reserve := func() *delayqv1.Job {
		t.Helper()
		var res delayqv1.ReserveResponse
		a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}}, &res)
		if len(res.Jobs) != 1 {
			t.Fatalf("reserve = %v", &res)
		}
		return res.Jobs[0]
	}
	j := reserve()
	var rel delayqv1.ReleaseResponse
	a.must("Release", &delayqv1.ReleaseRequest{Id: j.Id, Reservation: j.Reservation, Reason: "flaky", Priority: proto.Uint32(7)}, &rel)
	if rel.Job.State != "ready" || rel.Job.LastReason != "flaky" || rel.Job.LastFailed == nil || rel.Job.Priority != 7 || rel.Job.Releases != 1 {
		t.Fatalf("release = %v", rel.Job)
	}
	j = reserve()
	var touch delayqv1.TouchResponse
	a.must("Touch", &delayqv1.TouchRequest{Id: j.Id, Reservation: j.Reservation}, &touch)
	if touch.Job.Deadline.AsTime().Before(j.Deadline.AsTime()) {
		t.Fatalf("touch moved the deadline back: %v → %v", j.Deadline, touch.Job.Deadline)
	}
	var bury delayqv1.BuryResponse
	a.must("Bury", &delayqv1.BuryRequest{Id: j.Id, Reservation: j.Reservation, Reason: "bad"}, &bury)
	if bury.Job.State != "buried" || bury.Job.Buries != 1 || bury.Job.Reservation != "" {
		t.Fatalf("bury = %v", bury.Job)
	}
	var list delayqv1.ListResponse
	a.must("List", &delayqv1.ListRequest{Topic: "t", State: "buried"}, &list)
	if len(list.Jobs) != 1 || list.Jobs[0].Id != j.Id || list.Next != "" {
		t.Fatalf("list buried = %v", &list)
	}
	var kt delayqv1.KickTopicResponse
	a.must("KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: 10}, &kt)
	if kt.Kicked != 1 || kt.State != "buried" {
		t.Fatalf("kick topic = %v", &kt)
	}
	// With none buried, a topic kick leaves the delayed job b alone.
	a.must("KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: 10}, &kt)
	if kt.Kicked != 0 || kt.State != "buried" {
		t.Fatalf("kick topic with none buried = %v, want 0 buried", &kt)
	}
	var kick delayqv1.KickResponse
	a.must("Kick", &delayqv1.KickRequest{Id: "b"}, &kick)
	if kick.Job.State != "ready" || kick.Job.Kicks != 1 {
		t.Fatalf("kick b = %v", kick.Job)
	}
	var upd delayqv1.UpdateResponse
	a.must("Update", &delayqv1.UpdateRequest{Id: "b", Body: []byte{}, Delay: durationpb.New(time.Hour)}, &upd)
	if upd.Job.State != "delayed" || len(upd.Job.Body) != 0 {
		t.Fatalf("update b = %v", upd.Job)
	}
	a.must("Update", &delayqv1.UpdateRequest{Id: "b", Priority: proto.Uint32(1)}, &upd)
	if upd.Job.Priority != 1 || upd.Job.State != "delayed" {
		t.Fatalf("update b's priority = %v (the body and due time must stay)", upd.Job)
	}
	a.must("KickTopic", &delayqv1.KickTopicRequest{Topic: "t", N: 10, State: "delayed"}, &kt)
	if kt.Kicked != 1 || kt.State != "delayed" {
		t.Fatalf("kick topic's delayed jobs = %v, want 1 delayed", &kt)
	}
	a.must("Update", &delayqv1.UpdateRequest{Id: "b", Delay: durationpb.New(time.Hour)}, &upd)
	var res delayqv1.ReserveResponse
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t"}, N: 10}, &res)
	if len(res.Jobs) != 2 {
		t.Fatalf("reserve = %v", &res)
	}
	var fb delayqv1.FinishBatchResponse
	a.must("FinishBatch", &delayqv1.FinishBatchRequest{Jobs: []*delayqv1.FinishRef{
		{Id: res.Jobs[0].Id, Reservation: res.Jobs[0].Reservation},
		{Id: res.Jobs[1].Id, Reservation: "1-1"},
		{Id: "bad id", Reservation: "x"},
	}}, &fb)
	if len(fb.Results) != 3 || !fb.Results[0].Ok || fb.Results[1].Error.GetCode() != delayq.CodeNotReserved || fb.Results[2].Error.GetCode() != delayq.CodeBadID ||
		fb.Results[1].Id != res.Jobs[1].Id {
		t.Fatalf("finish batch = %v", &fb)
	}
	var del delayqv1.DeleteResponse
	a.must("Delete", &delayqv1.DeleteRequest{Id: "b"}, &del)
	if del.Job.Id != "b" {
		t.Fatalf("delete = %v", del.Job)
	}
	if _, err := a.e.Get(context.Background(), delayq.Ref{ID: "b"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("b after delete: %v", err)
	}
	a.must("Put", &delayqv1.PutRequest{Topic: "t2", Id: "c", Body: []byte("4")}, &delayqv1.PutResponse{})
	var got delayqv1.GetResponse
	a.must("Get", &delayqv1.GetRequest{Id: "c"}, &got)
	if got.Job.GetId() != "c" || got.Job.GetState() != "ready" {
		t.Fatalf("get c = %v", got.Job)
	}
	var res2 delayqv1.ReserveResponse
	a.must("Reserve", &delayqv1.ReserveRequest{Topics: []string{"t2"}}, &res2)
	if len(res2.Jobs) != 1 {
		t.Fatalf("reserve t2 = %v", &res2)
	}
	a.must("Finish", &delayqv1.FinishRequest{Id: "c", Reservation: res2.Jobs[0].Reservation}, &delayqv1.FinishResponse{})

	// Every method of the service answered with success at least once
	// (each call is observed once its answer is written, hence the wait).
	methods := delayqv1.File_delayq_v1_delayq_proto.Services().ByName("DelayQService").Methods()
	succeeded := func() (missing []string) {
		ok := map[string]bool{}
		mfs, err := a.e.Metrics().Registry.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() != "delayq_grpc_request_duration_seconds" {
				continue
			}
			for _, m := range mf.GetMetric() {
				labels := map[string]string{}
				for _, l := range m.GetLabel() {
					labels[l.GetName()] = l.GetValue()
				}
				if labels["code"] == "ok" {
					ok[labels["procedure"]] = true
				}
			}
		}
		for i := range methods.Len() {
			if proc := "/delayq.v1.DelayQService/" + string(methods.Get(i).Name()); !ok[proc] {
				missing = append(missing, proc)
			}
		}
		return missing
	}
	for deadline := time.Now().Add(10 * time.Second); len(succeeded()) > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("methods never answered with success: %v", succeeded())
		}
	}
}
