package httpapi

import (
	"net/http"
	"strconv"

	"github.com/delayq/delayq/api"
)

// openapiDoc is the OpenAPI document, read once: it is embedded in the
// binary and never changes.
var openapiDoc = api.OpenAPI()

// openapi: GET /v1/openapi.json → the OpenAPI 3.1 document of this API
// (api/openapi.yaml), for client generators and request checkers. It
// holds no data, so the guard lets anyone read it.
func (h *handler) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openapiDoc)))
	w.Write(openapiDoc)
}
