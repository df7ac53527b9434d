package server

import (
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectpb "google.golang.org/grpc/reflection/grpc_reflection_v1"
)

// The server's HTTP port, where gRPC is served (h2c here), answers the
// standard health and reflection services.
func TestStandardGRPCServicesOnHTTPPort(t *testing.T) {
	s := startServer(t, testConfig(t), &syncBuffer{})
	conn, err := grpc.NewClient("passthrough:///"+s.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(t.Context(), &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health Check = %v, %v; want SERVING", resp, err)
	}
	stream, err := reflectpb.NewServerReflectionClient(conn).ServerReflectionInfo(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectpb.ServerReflectionRequest{MessageRequest: &reflectpb.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil || len(list.GetListServicesResponse().GetService()) < 2 {
		t.Fatalf("reflection ListServices = %v, %v", list, err)
	}
	_ = stream.CloseSend()
}
