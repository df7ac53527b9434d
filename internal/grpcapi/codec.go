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
//
// Connect clients name JSON two ways, "application/json" and
// "application/json; charset=utf-8", each its own codec name; both are
// this codec (strictJSONCharset), or the second would fall back to
// connect's lenient one.
type strictJSON struct{}

func (strictJSON) Name() string { return "json" }

// strictJSONCharset is strictJSON under the name connect gives
// "application/json; charset=utf-8".
type strictJSONCharset struct{ strictJSON }

func (strictJSONCharset) Name() string { return "json; charset=utf-8" }

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
