package grpcapi

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// strictJSON is the JSON codec of Connect and gRPC-Web JSON clients
// ("json"), in place of connect's own, which drops fields it does not
// know. The HTTP API refuses a key that is no field (unknown_field), so
// that a misspelt "ttl" or "Delay" is not silently ignored and the job
// put with the defaults; so does this: such a request is
// INVALID_ARGUMENT, its message naming the field. (protojson accepts the
// JSON name and the proto name of each field: "max_attempts" and
// "maxAttempts".) Binary protobuf keeps its own rule, that a field a
// newer client sends is skipped by an older server.
type strictJSON struct{}

func (strictJSON) Name() string { return "json" }

func (strictJSON) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("%T is not a protobuf message", v)
	}
	return protojson.MarshalOptions{}.Marshal(m)
}

func (strictJSON) Unmarshal(b []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return fmt.Errorf("%T is not a protobuf message", v)
	}
	if len(b) == 0 {
		return fmt.Errorf("the request body is empty; send a JSON object")
	}
	return protojson.UnmarshalOptions{DiscardUnknown: false}.Unmarshal(b, m)
}
