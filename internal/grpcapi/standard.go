package grpcapi

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"connectrpc.com/connect"
	"connectrpc.com/grpchealth"
	"connectrpc.com/grpcreflect"

	"github.com/delayq/delayq/api/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// The standard gRPC services served beside DelayQService, so that
// grpcurl, Postman and Kubernetes' gRPC probes work with no .proto file
// at hand:
//
//   - grpc.reflection.v1 (and v1alpha, which older grpcurl asks for)
//     describes DelayQService and the health service. It is the
//     operation auth.OpDescribe, as /v1/openapi.json over HTTP: anyone
//     may call it, without a token, since it shows the API's shape and
//     no data, and the same shape is published in the repository.
//   - grpc.health.v1 answers SERVING, or NOT_SERVING while the store is
//     degraded (engine.Health: below its free-space floor, failed) or
//     the server is draining. It is auth.OpHealth, as /healthz: anyone,
//     without a token, because a probe (a kubelet's, a load balancer's)
//     has none to send, and it learns one bit.
//
// Both still pass the other checks before a call (Host names, the
// request rate per address, the bytes in flight); a request that sends a
// token must send a valid one.

// standard maps the standard services' procedures to their operations.
var standard = map[string]auth.Op{
	"/" + grpchealth.HealthV1ServiceName + "/Check":                  auth.OpHealth,
	"/" + grpchealth.HealthV1ServiceName + "/Watch":                  auth.OpHealth,
	"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo":      auth.OpDescribe,
	"/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo": auth.OpDescribe,
}

// StandardPrefixes are the path prefixes of the standard services, for a
// server that routes by prefix (as it routes DelayQService's).
var StandardPrefixes = []string{
	"/" + grpchealth.HealthV1ServiceName + "/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// newStandard returns the handler of the standard services over e.
func newStandard(e *engine.Engine) http.Handler {
	mux := http.NewServeMux()
	reflector := grpcreflect.NewStaticReflector(delayqv1connect.DelayQServiceName, grpchealth.HealthV1ServiceName)
	mux.Handle(grpcreflect.NewHandlerV1(reflector))
	mux.Handle(grpcreflect.NewHandlerV1Alpha(reflector))
	mux.Handle(grpchealth.NewHandler(healthChecker{e}))
	return mux
}

// healthChecker answers grpc.health.v1 for the server as a whole ("")
// and for DelayQService by name.
type healthChecker struct{ e *engine.Engine }

func (c healthChecker) Check(_ context.Context, req *grpchealth.CheckRequest) (*grpchealth.CheckResponse, error) {
	switch req.Service {
	case "", delayqv1connect.DelayQServiceName:
	default:
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no service "+req.Service+" here; ask for \"\" or "+delayqv1connect.DelayQServiceName))
	}
	if c.e.Draining() || c.e.Health() != "" {
		return &grpchealth.CheckResponse{Status: grpchealth.StatusNotServing}, nil
	}
	return &grpchealth.CheckResponse{Status: grpchealth.StatusServing}, nil
}

// isStandard says whether path is under one of StandardPrefixes.
func isStandard(path string) bool {
	for _, p := range StandardPrefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}
