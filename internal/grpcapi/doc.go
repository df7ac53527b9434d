// Package grpcapi serves delayq's gRPC API, the protobuf service
// delayq.v1.DelayQService (proto/delayq/v1/delayq.proto), with ConnectRPC:
// one handler answers gRPC (HTTP/2), gRPC-Web and Connect (JSON or binary,
// HTTP/1.1 or HTTP/2) clients. The server mounts it on its HTTP port.
//
// Like internal/httpapi it only translates: a call's message becomes an
// engine request (convert.go), the engine checks every rule, and its
// errors become status codes with the delayq code in an ErrorInfo detail
// (errors.go). The checks that come before a call are the HTTP API's,
// applied to the call: the Host header, the bearer token or client
// certificate, the token's request rate, its scope for the method (auth's
// scope table, by the operation each method maps to in rules.go), the
// request bytes in flight and the request's size (handler.go). Audit records, the access log and the request
// duration histogram are written as the HTTP API writes them.
package grpcapi
