package tlsconf_test

import (
	"crypto/tls"
	"os"
	"testing"

	"github.com/delayq/delayq/internal/tlsconf"
	"github.com/delayq/delayq/internal/tlsconf/tlstest"
)

// handshake dials l with cfg and returns the server certificate's CN.
func handshake(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

func serve(t *testing.T, cfg *tls.Config) string {
	t.Helper()
	l, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()
	return l.Addr().String()
}

func TestReloadOnSIGHUPAndClientCerts(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "server", "localhost")
	r, err := tlsconf.New(tlsconf.Files{Cert: cert, Key: key, ClientCA: ca.File, ClientCertRequired: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, r.Config())
	trust, err := tlsconf.ClientConfig(ca.File)
	if err != nil {
		t.Fatal(err)
	}
	trust.ServerName = "localhost"

	// Without a client certificate the handshake is refused (TLS 1.3
	// reports it on the first read, so read).
	if c, err := tls.Dial("tcp", addr, trust); err == nil {
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if err == nil {
			t.Fatal("a client without a certificate got in")
		}
	}
	ccert, ckey := ca.Issue(t, "client", "worker-1")
	pair, err := tls.LoadX509KeyPair(ccert, ckey)
	if err != nil {
		t.Fatal(err)
	}
	withCert := trust.Clone()
	withCert.Certificates = []tls.Certificate{pair}
	if cn, err := handshake(t, addr, withCert); err != nil || cn != "localhost" {
		t.Fatalf("handshake with a client certificate: %q, %v", cn, err)
	}

	// Renew the certificate in place (a new CN to tell them apart); Reload
	// serves it on the next handshake.
	c2, k2 := ca.Issue(t, "renewed", "localhost")
	b, _ := os.ReadFile(c2)
	os.WriteFile(cert, b, 0o600)
	b, _ = os.ReadFile(k2)
	os.WriteFile(key, b, 0o600)
	if err := r.Reload(); err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", addr, withCert)
	if err != nil {
		t.Fatal(err)
	}
	serialAfter := c.ConnectionState().PeerCertificates[0].SerialNumber
	c.Close()
	want, _ := tls.LoadX509KeyPair(c2, k2)
	if got := want.Leaf.SerialNumber; got.Cmp(serialAfter) != 0 {
		t.Fatalf("after Reload the server presents serial %v, want %v", serialAfter, got)
	}

	// A broken file keeps the last good certificate.
	os.WriteFile(cert, []byte("garbage"), 0o600)
	if err := r.Reload(); err == nil {
		t.Fatal("a garbage certificate reloaded")
	}
	if _, err := handshake(t, addr, withCert); err != nil {
		t.Fatalf("after a failed reload: %v", err)
	}
}
