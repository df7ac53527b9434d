package grpcapi

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/auth"
)

// TestReservationAttackOverGRPC is issue 18's attack over gRPC, as
// server.TestReservationAttackOverHTTP makes it over HTTP: a token with
// produce and consume on a* presents the reservation of a job in topic
// bvictim that another consumer holds, both the old guessable
// "<seq>-<attempt>" and the real one (leaked), to every method that names
// a job; each is refused by the job's own topic (PermissionDenied,
// forbidden; a batch finish's entry alone). A token that may consume
// bvictim cannot guess the reservation either: without the server's tag
// it is not_reserved. The job comes out of it as its holder left it.
func TestReservationAttackOverGRPC(t *testing.T) {
	t.Parallel()
	inline := fmt.Sprintf(`{"tokens":[
	  {"name":"attacker","sha256":%q,"scopes":["produce","consume"],"topics":["a*"]},
	  {"name":"victim","sha256":%q,"scopes":["consume"],"topics":["bvictim"]},
	  {"name":"neighbour","sha256":%q,"scopes":["consume"],"topics":["b*"]},
	  {"name":"ops","sha256":%q,"scopes":["admin"]}]}`,
		auth.HashToken("attacker"), auth.HashToken("victim"), auth.HashToken("neighbour"), auth.HashToken("ops"))
	tokens, err := auth.Load("", inline)
	if err != nil {
		t.Fatal(err)
	}
	a := newAPI(t, Options{Auth: tokens})
	as := func(token string) context.Context { return withToken(t.Context(), token) }
	if err := a.call(as("ops"), "Put", &delayqv1.PutRequest{Topic: "bvictim", Id: "v1", Body: []byte("secret")}, &delayqv1.PutResponse{}); err != nil {
		t.Fatal(err)
	}
	var res delayqv1.ReserveResponse
	if err := a.call(as("victim"), "Reserve", &delayqv1.ReserveRequest{Topics: []string{"bvictim"}}, &res); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("the victim's reserve = %v, %v", &res, err)
	}
	held := res.Jobs[0]
	if !regexp.MustCompile(`^\d+-1-[0-9a-f]{32}$`).MatchString(held.Reservation) {
		t.Fatalf("reservation %q is not <seq>-<attempt>-<128-bit tag>", held.Reservation)
	}
	guess := fmt.Sprintf("%d-1", held.Seq)

	byReservation := func(res string) map[string]proto.Message {
		return map[string]proto.Message{
			"Touch":   &delayqv1.TouchRequest{Id: "v1", Reservation: res},
			"Release": &delayqv1.ReleaseRequest{Id: "v1", Reservation: res, Delay: durationpb.New(3600e9)},
			"Bury":    &delayqv1.BuryRequest{Id: "v1", Reservation: res},
			"Finish":  &delayqv1.FinishRequest{Id: "v1", Reservation: res},
		}
	}
	for _, res := range []string{guess, held.Reservation} {
		calls := byReservation(res)
		calls["Get"] = &delayqv1.GetRequest{Id: "v1"}
		calls["Delete"] = &delayqv1.DeleteRequest{Id: "v1"}
		calls["Kick"] = &delayqv1.KickRequest{Id: "v1"}
		calls["Update"] = &delayqv1.UpdateRequest{Id: "v1", Priority: proto.Uint32(1)}
		for method, in := range calls {
			st, info := errInfo(t, a.call(as("attacker"), method, in, newOut(method)))
			if st.Code() != codes.PermissionDenied || info.Code != delayq.CodeForbidden {
				t.Errorf("attacker %s with reservation %q = %v %v, want PermissionDenied forbidden", method, res, st.Code(), info)
			}
		}
		var fr delayqv1.FinishBatchResponse
		err := a.call(as("attacker"), "FinishBatch", &delayqv1.FinishBatchRequest{Jobs: []*delayqv1.FinishRef{{Id: "v1", Reservation: res}}}, &fr)
		if err != nil || len(fr.Results) != 1 || fr.Results[0].Ok || fr.Results[0].Error.GetCode() != delayq.CodeForbidden {
			t.Errorf("attacker's batch finish with reservation %q = %v, %v; want its entry forbidden", res, &fr, err)
		}
	}
	for _, res := range []string{guess, guess + "-" + strings.Repeat("0", 32), held.Reservation + "0", "x"} {
		for method, in := range byReservation(res) {
			st, info := errInfo(t, a.call(as("neighbour"), method, in, newOut(method)))
			if st.Code() == codes.OK || info.Code != delayq.CodeNotReserved {
				t.Errorf("neighbour %s with reservation %q = %v %v, want not_reserved", method, res, st.Code(), info)
			}
		}
	}

	var get delayqv1.GetResponse
	if err := a.call(as("ops"), "Get", &delayqv1.GetRequest{Id: "v1"}, &get); err != nil {
		t.Fatal(err)
	}
	if j := get.Job; j.State != "reserved" || j.Reservation != held.Reservation || !j.Deadline.AsTime().Equal(held.Deadline.AsTime()) ||
		j.Attempts != 1 || j.Releases != 0 || j.Buries != 0 || j.Priority != held.Priority {
		t.Fatalf("the job after the attack = %v; it was reserved as %v", j, held)
	}
	if err := a.call(as("victim"), "Finish", &delayqv1.FinishRequest{Id: "v1", Reservation: held.Reservation}, &delayqv1.FinishResponse{}); err != nil {
		t.Errorf("the holder's finish: %v", err)
	}
}
