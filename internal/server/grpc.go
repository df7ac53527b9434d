package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/delayq/delayq/internal/grpcapi"
	"github.com/delayq/delayq/internal/httpapi"
)

// withGRPC serves the gRPC API (internal/grpcapi, delayq.v1.DelayQService,
// and the standard grpc.health.v1 and grpc.reflection services) on the
// HTTP port beside api: requests under its path go to it, with the
// same tokens, Host names, request rates and bytes in flight as the HTTP
// API; every other request goes to api as before. It keeps its own
// checks rather than passing through httpapi.Guard because a refusal
// must reach a gRPC client as a gRPC status, not a JSON body.
func (s *Server) withGRPC(api http.Handler) http.Handler {
	path, g := grpcapi.New(s.eng, grpcapi.Options{
		Logger:    s.log.With("component", "grpc"),
		AccessLog: s.cfg.AccessLog,
		Auth:      s.sec.auth,
		Hosts:     httpapi.NewHostPolicy(s.allowedHosts()).Allowed,
		Rates:     s.sec.rates,
		Failures:  s.sec.fails,
		Bytes:     s.sec.bytes,
	})
	// A browser page of another site must not call it with the
	// operator's credentials either (gRPC-Web and Connect are reachable
	// from a page).
	g = http.NewCrossOriginProtection().Handler(g)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, path) || slices.ContainsFunc(grpcapi.StandardPrefixes, func(p string) bool { return strings.HasPrefix(r.URL.Path, p) }) {
			g.ServeHTTP(w, r)
			return
		}
		api.ServeHTTP(w, r)
	})
}

// httpProtocols are what the HTTP port speaks: HTTP/1.1, HTTP/2 over TLS
// (offered by ALPN, see secureHTTP), and HTTP/2 without TLS with prior
// knowledge (h2c), which gRPC clients use on a plaintext port.
func httpProtocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return p
}
