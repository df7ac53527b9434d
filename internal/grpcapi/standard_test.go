package grpcapi

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
)

// withTokens is a server whose only token, "ops", may do everything.
func withTokens(t *testing.T) Options {
	t.Helper()
	tokens, err := auth.Load("", fmt.Sprintf(`{"tokens":[{"name":"ops","sha256":%q,"scopes":["admin"]}]}`, auth.HashToken("ops")))
	if err != nil {
		t.Fatal(err)
	}
	return Options{Auth: tokens}
}

// reflect asks the server's reflection service one question.
func reflectOnce(t *testing.T, c reflectpb.ServerReflectionClient, req *reflectpb.ServerReflectionRequest) *reflectpb.ServerReflectionResponse {
	t.Helper()
	stream, err := c.ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("reflection: %v", err)
	}
	_ = stream.CloseSend()
	if _, err := stream.Recv(); err != io.EOF {
		t.Fatalf("reflection stream end = %v", err)
	}
	return resp
}

// A client with no .proto at hand, as grpcurl is, lists the services by
// reflection (no token needed: the API's shape is public), builds the
// messages of DelayQService from the descriptors the server sends, and
// puts and gets a job with them (with a token).
func TestReflectionWithoutProto(t *testing.T) {
	t.Parallel()
	a := newAPI(t, withTokens(t))
	rc := reflectpb.NewServerReflectionClient(a.conn)
	list := reflectOnce(t, rc, &reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}})
	names := map[string]bool{}
	for _, s := range list.GetListServicesResponse().GetService() {
		names[s.GetName()] = true
	}
	if !names["delayq.v1.DelayQService"] || !names["grpc.health.v1.Health"] {
		t.Fatalf("listed services %v, want delayq.v1.DelayQService and grpc.health.v1.Health", names)
	}
	// The file of the service and every file it imports, from the server.
	files := map[string]*descriptorpb.FileDescriptorProto{}
	want := []*reflectpb.ServerReflectionRequest{{MessageRequest: &reflectpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "delayq.v1.DelayQService"}}}
	for len(want) > 0 {
		resp := reflectOnce(t, rc, want[0])
		want = want[1:]
		for _, b := range resp.GetFileDescriptorResponse().GetFileDescriptorProto() {
			fd := &descriptorpb.FileDescriptorProto{}
			if err := proto.Unmarshal(b, fd); err != nil {
				t.Fatal(err)
			}
			if _, seen := files[fd.GetName()]; seen {
				continue
			}
			files[fd.GetName()] = fd
			for _, dep := range fd.GetDependency() {
				if _, seen := files[dep]; !seen {
					want = append(want, &reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_FileByFilename{FileByFilename: dep}})
				}
			}
		}
	}
	set := &descriptorpb.FileDescriptorSet{}
	for _, fd := range files {
		set.File = append(set.File, fd)
	}
	reg, err := protodesc.NewFiles(set) // a registry of the server's descriptors alone
	if err != nil {
		t.Fatal(err)
	}
	d, err := reg.FindDescriptorByName("delayq.v1.DelayQService")
	if err != nil {
		t.Fatal(err)
	}
	svc := d.(protoreflect.ServiceDescriptor)
	put, get := svc.Methods().ByName("Put"), svc.Methods().ByName("Get")
	in := dynamicpb.NewMessage(put.Input())
	in.Set(put.Input().Fields().ByName("topic"), protoreflect.ValueOfString("reflected"))
	in.Set(put.Input().Fields().ByName("id"), protoreflect.ValueOfString("r1"))
	in.Set(put.Input().Fields().ByName("body"), protoreflect.ValueOfBytes([]byte("hello")))
	out := dynamicpb.NewMessage(put.Output())
	ctx := withToken(t.Context(), "ops")
	if err := a.conn.Invoke(ctx, "/delayq.v1.DelayQService/Put", in, out); err != nil {
		t.Fatalf("Put by reflection: %v", err)
	}
	if id := out.Get(put.Output().Fields().ByName("id")).String(); id != "r1" {
		t.Fatalf("Put answered id %q, want r1", id)
	}
	gin := dynamicpb.NewMessage(get.Input())
	gin.Set(get.Input().Fields().ByName("id"), protoreflect.ValueOfString("r1"))
	gout := dynamicpb.NewMessage(get.Output())
	if err := a.conn.Invoke(ctx, "/delayq.v1.DelayQService/Get", gin, gout); err != nil {
		t.Fatal(err)
	}
	job := gout.Get(get.Output().Fields().ByName("job")).Message()
	if body := job.Get(job.Descriptor().Fields().ByName("body")).Bytes(); string(body) != "hello" {
		t.Errorf("Get by reflection: body %q, want hello", body)
	}
	// Reflection is no way around the token: the service still wants one.
	if err := a.conn.Invoke(t.Context(), "/delayq.v1.DelayQService/Put", in, out); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Put without a token = %v, want unauthenticated", err)
	}
}

// sickStore is a store whose health the test sets.
type sickStore struct {
	store.Store
	reason atomic.Value // string
}

func (s *sickStore) Health() string { r, _ := s.reason.Load().(string); return r }

// The health service answers without a token: SERVING, NOT_SERVING
// while the store is degraded, SERVING again once it is well; NotFound
// for a service it does not serve.
func TestHealthService(t *testing.T) {
	t.Parallel()
	ds, err := diskstore.Open(t.TempDir(), diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	st := &sickStore{Store: ds}
	a := startAPI(t, st, withTokens(t))
	hc := healthpb.NewHealthClient(a.conn)
	check := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q) = %v", service, err)
		}
		return resp.GetStatus()
	}
	for _, svc := range []string{"", "delayq.v1.DelayQService"} {
		if got := check(svc); got != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("Check(%q) = %v, want SERVING", svc, got)
		}
	}
	st.reason.Store("the disk is below its free-space floor")
	if got := check(""); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("Check with the store degraded = %v, want NOT_SERVING", got)
	}
	st.reason.Store("")
	if got := check(""); got != healthpb.HealthCheckResponse_SERVING {
		t.Errorf("Check once well again = %v, want SERVING", got)
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "no.Such"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(no.Such) = %v, want NotFound", err)
	}
	// A probe that sends a token must send a valid one.
	if _, err := hc.Check(withToken(context.Background(), "wrong"), &healthpb.HealthCheckRequest{}, grpc.WaitForReady(false)); status.Code(err) != codes.Unauthenticated {
		t.Errorf("Check with a wrong token = %v, want unauthenticated", err)
	}
}
