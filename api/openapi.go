package api

import _ "embed" // the OpenAPI document

// openapiJSON is openapi.json: openapi.yaml, the hand-written source,
// converted (internal/httpapi's TestOpenAPIJSON keeps the two equal).
//
//go:embed openapi.json
var openapiJSON string

// OpenAPI returns the OpenAPI 3.1 document of the v1 HTTP API, as JSON:
// what GET /v1/openapi.json serves. Each call returns a fresh copy.
func OpenAPI() []byte { return []byte(openapiJSON) }
