// Package tlsconf builds the server's TLS configuration from certificate
// files and keeps it current: a renewed certificate (or client CA bundle)
// is picked up on the next handshake after its file changes, or at once on
// Reload (SIGHUP), without a restart and without dropping connections.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"
)

// Files names the PEM files of a server's TLS setup.
type Files struct {
	// Cert and Key are the server's certificate chain and private key.
	Cert, Key string
	// ClientCA, when set, is the bundle of CAs whose client certificates
	// are verified (mutual TLS). Clients without a certificate are still
	// let in when ClientCertRequired is false; a certificate that does not
	// verify is always refused in the handshake.
	ClientCA string
	// ClientCertRequired refuses handshakes without a client certificate.
	ClientCertRequired bool
}

// checkEvery spaces the stat calls that notice changed files: at most one
// pair of stats per second, whatever the handshake rate.
const checkEvery = time.Second

// Reloader serves the current certificate and client CAs.
type Reloader struct {
	files Files

	mu      sync.Mutex
	cert    *tls.Certificate // guarded by mu
	pool    *x509.CertPool   // guarded by mu
	stamp   string           // guarded by mu: modification times and sizes of the files loaded
	checked time.Time        // guarded by mu
}

// New loads the files; an error names the file that is missing or bad.
func New(f Files) (*Reloader, error) {
	if f.Cert == "" || f.Key == "" {
		return nil, errors.New("tlsconf: both a certificate and a key file are needed")
	}
	r := &Reloader{files: f}
	if err := r.Reload(); err != nil {
		return nil, err
	}
	return r, nil
}

// stamp describes the files' versions cheaply (stat, not read).
func (r *Reloader) currentStamp() string {
	s := ""
	for _, p := range []string{r.files.Cert, r.files.Key, r.files.ClientCA} {
		if p == "" {
			continue
		}
		if fi, err := os.Stat(p); err == nil {
			s += fmt.Sprintf("%d.%d;", fi.ModTime().UnixNano(), fi.Size())
		}
	}
	return s
}

// Reload reads the files again. On error the previous certificate stays in
// use (a half-written renewal must not take TLS down).
func (r *Reloader) Reload() error {
	stamp := r.currentStamp()
	cert, err := tls.LoadX509KeyPair(r.files.Cert, r.files.Key)
	if err != nil {
		return fmt.Errorf("tlsconf: load %s and %s: %w", r.files.Cert, r.files.Key, err)
	}
	var pool *x509.CertPool
	if r.files.ClientCA != "" {
		pem, err := os.ReadFile(r.files.ClientCA)
		if err != nil {
			return fmt.Errorf("tlsconf: %w", err)
		}
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("tlsconf: %s holds no PEM certificate", r.files.ClientCA)
		}
	}
	r.mu.Lock()
	r.cert, r.pool, r.stamp, r.checked = &cert, pool, stamp, time.Now()
	r.mu.Unlock()
	return nil
}

// current returns the certificate and pool, reloading first when the
// files changed since they were loaded (checked at most once a second).
func (r *Reloader) current() (*tls.Certificate, *x509.CertPool) {
	r.mu.Lock()
	due := time.Since(r.checked) >= checkEvery
	if due {
		r.checked = time.Now()
	}
	stamp := r.stamp
	r.mu.Unlock()
	if due && r.currentStamp() != stamp {
		_ = r.Reload() // a failed reload keeps serving the old certificate
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cert, r.pool
}

// Config returns a server configuration that asks the Reloader for the
// certificate and client CAs of every handshake. nextProtos are the
// application protocols it offers by ALPN, most preferred first; none
// offers "http/1.1" alone. The HTTP listener offers "h2" too, which
// gRPC clients need.
func (r *Reloader) Config(nextProtos ...string) *tls.Config {
	if len(nextProtos) == 0 {
		nextProtos = []string{"http/1.1"}
	}
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			cert, pool := r.current()
			c := &tls.Config{
				MinVersion:   tls.VersionTLS12,
				Certificates: []tls.Certificate{*cert},
				NextProtos:   nextProtos,
			}
			if pool != nil {
				c.ClientCAs = pool
				c.ClientAuth = tls.VerifyClientCertIfGiven
				if r.files.ClientCertRequired {
					c.ClientAuth = tls.RequireAndVerifyClientCert
				}
			}
			return c, nil
		},
	}
}

// ClientConfig returns a client configuration that trusts the CAs in the
// PEM file caFile (plus the system's when caFile is empty), for the SDK
// and the CLI.
func ClientConfig(caFile string) (*tls.Config, error) {
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return c, nil
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	c.RootCAs = x509.NewCertPool()
	if !c.RootCAs.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", caFile)
	}
	return c, nil
}
