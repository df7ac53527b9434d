package client

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
)

// Token sends "Authorization: Bearer <token>" with every call, for servers
// started with tokens (--auth-file). A server answers a missing or unknown
// token 401 unauthorized, and a token without the scope for a call 403
// forbidden.
func Token(token string) Option {
	return clientOption(func(c *clientConfig) { c.token = token })
}

// TLSConfig sets the TLS configuration of https:// addresses: the CAs to
// trust (RootCAs) and a client certificate for mutual TLS (Certificates).
// It applies to the transport of HTTPClient's client when that is an
// *http.Transport (or to a copy of http.DefaultTransport).
func TLSConfig(cfg *tls.Config) Option {
	return clientOption(func(c *clientConfig) { c.tls = cfg })
}

// CAFile trusts the CA certificates of a PEM file for https:// addresses,
// as for a server whose certificate a private CA signed. An unreadable
// file makes NewClient fail (and New panic).
func CAFile(path string) Option {
	return clientOption(func(c *clientConfig) {
		pem, err := os.ReadFile(path)
		if err != nil {
			c.err = fmt.Errorf("client: CA file: %w", err)
			return
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			c.err = fmt.Errorf("client: CA file %s holds no PEM certificate", path)
			return
		}
		if c.tls == nil {
			c.tls = &tls.Config{MinVersion: tls.VersionTLS12}
		} else {
			c.tls = c.tls.Clone()
		}
		c.tls.RootCAs = pool
	})
}

// secure returns the HTTP client the options ask for: hc with the TLS
// configuration on its transport and the token on every request.
func (c *clientConfig) secure() (*http.Client, error) {
	if c.err != nil {
		return nil, c.err
	}
	hc := c.hc
	if c.tls == nil && c.token == "" {
		return hc, nil
	}
	out := *hc // a copy: the caller's client is not changed
	base := out.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	if c.tls != nil {
		t, ok := base.(*http.Transport)
		if !ok {
			return nil, errors.New("client: TLSConfig or CAFile needs the HTTP client's Transport to be an *http.Transport")
		}
		t = t.Clone()
		t.TLSClientConfig = c.tls
		base = t
	}
	if c.token != "" {
		base = &bearer{base: base, header: "Bearer " + c.token}
	}
	out.Transport = base
	return &out, nil
}

// bearer adds the Authorization header to each request.
type bearer struct {
	base   http.RoundTripper
	header string
}

func (b *bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", b.header)
	return b.base.RoundTrip(r)
}

// CloseIdleConnections passes on to the transport, so http.Client's
// CloseIdleConnections still reaches it.
func (b *bearer) CloseIdleConnections() {
	if ci, ok := b.base.(interface{ CloseIdleConnections() }); ok {
		ci.CloseIdleConnections()
	}
}
