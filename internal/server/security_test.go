package server

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/tlsconf"
	"github.com/delayq/delayq/internal/tlsconf/tlstest"
)

// authFile writes an auth file with a producer of order*, a consumer of
// order* (also by client certificate "worker-1") and an admin.
func authFile(t *testing.T, producerToken string) string {
	t.Helper()
	text := fmt.Sprintf(`{"tokens":[
	  {"name":"shop","sha256":%q,"scopes":["produce"],"topics":["order*"]},
	  {"name":"worker","sha256":%q,"client_names":["worker-1"],"scopes":["consume"],"topics":["order*"]},
	  {"name":"ops","sha256":%q,"scopes":["admin"]}]}`,
		auth.HashToken(producerToken), auth.HashToken("worker-token"), auth.HashToken("ops-token"))
	p := filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// secCall sends one request and returns the status and the error code.
func secCall(t *testing.T, hc *http.Client, method, url, token, host, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	var e api.ErrorResponse
	b, _ := io.ReadAll(resp.Body)
	json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Code
}

func plainClient(t *testing.T) *http.Client {
	hc := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

func TestAuthScopesOverHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	u := s.URL()
	put := `{"body":"x","id":"%s"}`
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
	}{
		{"no token", "POST", "/v1/topics/orders/jobs", "", `{"body":"x"}`, 401, api.CodeUnauthorized},
		{"unknown token", "POST", "/v1/topics/orders/jobs", "nope", `{"body":"x"}`, 401, api.CodeUnauthorized},
		{"producer on its topic", "POST", "/v1/topics/orders/jobs", "shop-token", fmt.Sprintf(put, "o1"), 201, ""},
		{"producer elsewhere", "POST", "/v1/topics/mail/jobs", "shop-token", `{"body":"x"}`, 403, api.CodeForbidden},
		{"producer reserving", "POST", "/v1/reserve", "shop-token", `{"topics":["orders"]}`, 403, api.CodeForbidden},
		{"consumer reserving elsewhere", "POST", "/v1/reserve", "worker-token", `{"topics":["orders","mail"]}`, 403, api.CodeForbidden},
		{"consumer reserving", "POST", "/v1/reserve", "worker-token", `{"topics":["orders"]}`, 200, ""},
		{"consumer deleting", "DELETE", "/v1/jobs/o1", "worker-token", "", 403, api.CodeForbidden},
		{"producer listing topics", "GET", "/v1/topics", "shop-token", "", 403, api.CodeForbidden},
		{"admin listing topics", "GET", "/v1/topics", "ops-token", "", 200, ""},
		{"producer revoking its job", "DELETE", "/v1/jobs/o1", "shop-token", "", 200, ""},
		{"original protocol needs every topic", "POST", "/", "shop-token", `{"command":"pop","topic":"orders"}`, 403, api.CodeForbidden},
		{"health is open", "GET", "/healthz", "", "", 200, ""},
		{"dashboard is open", "GET", "/ui/", "", "", 200, ""},
		{"metrics need read", "GET", "/metrics", "shop-token", "", 403, api.CodeForbidden},
	} {
		status, code := secCall(t, hc, c.method, u+c.path, c.token, "", c.body)
		if status != c.status || code != c.code {
			t.Errorf("%s: %d %q, want %d %q", c.name, status, code, c.status, c.code)
		}
	}

	// Rotate the producer's token: after a reload the old one is refused.
	os.WriteFile(cfg.AuthFile, mustRead(t, authFile(t, "shop-token-2")), 0o600)
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if status, _ := secCall(t, hc, "POST", u+"/v1/topics/orders/jobs", "shop-token", "", `{"body":"x"}`); status != 401 {
		t.Errorf("the old token after reload: %d", status)
	}
	if status, _ := secCall(t, hc, "POST", u+"/v1/topics/orders/jobs", "shop-token-2", "", `{"body":"x"}`); status != 201 {
		t.Errorf("the new token after reload: %d", status)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A DNS-rebinding page makes the browser send the attacker's name as Host.
func TestRebindingHostRefused(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AllowedHosts = []string{"queue.internal"}
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	_, port, _ := net.SplitHostPort(s.Addr().String())
	for host, want := range map[string]int{
		"evil.example:" + port:     403,
		"evil.example":             403,
		"localhost:" + port:        201,
		"127.0.0.1:" + port:        201,
		"queue.internal:" + port:   201,
		"[::1]:" + port:            201,
		"sub.queue.internal":       403,
		"app.localhost:" + port:    201,
		"QUEUE.INTERNAL.:" + port:  201,
		"queue.internal.evil.test": 403,
	} {
		status, code := secCall(t, hc, "POST", s.URL()+"/v1/topics/t/jobs", "", host, `{"body":"x"}`)
		if status != want || want == 403 && code != api.CodeHostNotAllowed {
			t.Errorf("Host %q: %d %q, want %d", host, status, code, want)
		}
	}
}

func TestRefusesToListenBeyondLoopbackWithoutTokens(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.HTTPAddr = "0.0.0.0:0"
	err := New(cfg, nil).Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "--insecure-listen") {
		t.Fatalf("Start = %v, want a refusal naming --insecure-listen", err)
	}
}

// Concurrent oversized batches wait for their share of the bytes in
// flight (or are refused) instead of each buffering its whole body.
func TestBytesInFlightBounded(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	const max = 24 << 20 // two batches' wire bytes and decoded copies (TestBatchPutChargesWhatItDecodes)
	cfg.MaxInflightBytes = max
	cfg.InflightWait = 50 * time.Millisecond
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)

	body := strings.Repeat("x", 60_000)
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := range 30 { // ~1.8 MB
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"body":%q}`, body)
	}
	sb.WriteString(`]}`)
	batch := sb.String()

	const n = 12
	var wg sync.WaitGroup
	results := make([]struct {
		status int
		code   string
	}, n)
	for i := range n {
		wg.Go(func() {
			results[i].status, results[i].code = secCall(t, hc, "POST", s.URL()+"/v1/topics/big/jobs/batch", "", "", batch)
		})
	}
	wg.Wait()
	ok := 0
	for _, r := range results {
		switch {
		case r.status == 201:
			ok++
		case r.status == 503 && r.code == api.CodeTooManyBytes:
		default:
			t.Errorf("batch answered %d %q", r.status, r.code)
		}
	}
	if ok == 0 {
		t.Error("no batch got through")
	}
	if peak := s.sec.bytes.Peak(); peak > max || peak < int64(len(batch)) {
		t.Errorf("peak bytes in flight %d, want between one batch (%d) and the bound %d", peak, len(batch), max)
	}
	if now := s.sec.bytes.InFlight(); now != 0 {
		t.Errorf("%d bytes still counted in flight after every answer", now)
	}
}

func TestHTTPConnectionCap(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.MaxHTTPConns = 2
	s := startServer(t, cfg, &syncBuffer{})
	// Two clients (each holds at most half the slots), each busy with a
	// long-poll, so neither connection is idle for a newcomer to take.
	for _, ip := range []string{"127.0.0.1", "127.0.0.2"} {
		c := dialFrom(t, ip, s.Addr().String())
		body := `{"topics":["idle"],"wait":"30s"}`
		fmt.Fprintf(c, "POST /v1/reserve HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
	}
	waitUntil(t, "both reserves waiting", func() bool { return s.Engine().Waiting("idle") == 2 })
	c := dialFrom(t, "127.0.0.3", s.Addr().String())
	io.WriteString(c, "GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || !strings.Contains(string(b), api.CodeTooManyConns) {
		t.Fatalf("over the cap: %d %s", resp.StatusCode, b)
	}
}

func TestRateAndTopicLimits(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.RateLimit = 0.001 // no refill within the test
	cfg.RateBurst = 4
	cfg.MaxTopics = 2
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	for i, want := range []int{201, 201, 507, 201, 429} {
		topic := []string{"a", "b", "c", "a", "a"}[i]
		status, code := secCall(t, hc, "POST", s.URL()+"/v1/topics/"+topic+"/jobs", "", "", `{"body":"x"}`)
		if status != want {
			t.Errorf("put %d to %s: %d %q, want %d", i, topic, status, code, want)
		}
		if status == 507 && code != api.CodeTopicLimit || status == 429 && code != api.CodeRateLimited {
			t.Errorf("put %d: code %q", i, code)
		}
	}
}

// TLS on both listeners: the SDK over https:// with the CA, beanstalkd
// clients by certificate.
func TestTLSAndMutualTLS(t *testing.T) {
	t.Parallel()
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "server", "localhost")
	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	cfg.TLSCert, cfg.TLSKey, cfg.TLSClientCA = cert, key, ca.File
	// Beyond loopback, where only a client certificate lets a beanstalkd
	// client in (on loopback plain connections are trusted).
	cfg.BeanstalkAddr = "0.0.0.0:0"
	cfg.AdvertiseURL = "" // derived: https://127.0.0.1:port
	s := startServer(t, cfg, &syncBuffer{})
	if !strings.HasPrefix(s.URL(), "https://") {
		t.Fatalf("advertised %q, want https://", s.URL())
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}

	t.Run("sdk with the CA and a token", func(t *testing.T) {
		tc, _ := tlsconf.ClientConfig(ca.File)
		c := client.New([]string{s.URL()}, client.HTTPClient(hc), client.TLSConfig(tc), client.Token("shop-token"), client.Discovery(0))
		if _, err := c.Put(t.Context(), "orders", client.PutRequest{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		var re *api.RemoteError
		if _, err := c.Put(t.Context(), "mail", client.PutRequest{Body: []byte("x")}); !errors.As(err, &re) || re.Code != api.CodeForbidden {
			t.Fatalf("put elsewhere = %v, want forbidden", err)
		}
	})
	t.Run("sdk without the CA", func(t *testing.T) {
		c := client.New([]string{s.URL()}, client.HTTPClient(hc), client.Token("shop-token"), client.Discovery(0), client.CallAttempts(1))
		_, err := c.Put(t.Context(), "orders", client.PutRequest{Body: []byte("x")})
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("put without trusting the CA = %v", err)
		}
	})

	_, bsPort, _ := net.SplitHostPort(s.BeanstalkAddr().String())
	bs := net.JoinHostPort("127.0.0.1", bsPort)
	dialBS := func(t *testing.T, clientCN string) (*tls.Conn, *bufio.Reader) {
		tc, err := tlsconf.ClientConfig(ca.File)
		if err != nil {
			t.Fatal(err)
		}
		if clientCN != "" {
			cc, ck := ca.Issue(t, clientCN, clientCN)
			pair, err := tls.LoadX509KeyPair(cc, ck)
			if err != nil {
				t.Fatal(err)
			}
			tc.Certificates = []tls.Certificate{pair}
		}
		tc.ServerName = "localhost"
		c, err := tls.Dial("tcp", bs, tc)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	line := func(t *testing.T, c net.Conn, r *bufio.Reader, cmd string) string {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, cmd+"\r\n")
		l, err := r.ReadString('\n')
		if err != nil {
			return "closed: " + err.Error()
		}
		return strings.TrimSpace(l)
	}
	t.Run("beanstalk with a mapped certificate", func(t *testing.T) {
		c, r := dialBS(t, "worker-1")
		line(t, c, r, "watch orders")
		line(t, c, r, "ignore default")
		if got := line(t, c, r, "reserve-with-timeout 0"); !strings.HasPrefix(got, "RESERVED") {
			t.Fatalf("reserve = %q", got) // the job the SDK put above
		}
		r.ReadString('\n') // its body
		// A reserve that waits (the connection watched for a hang-up
		// meanwhile) leaves the TLS connection usable.
		if got := line(t, c, r, "reserve-with-timeout 1"); got != "TIMED_OUT" {
			t.Fatalf("waiting reserve = %q", got)
		}
		if got := line(t, c, r, "use orders"); got != "USING orders" {
			t.Fatal(got)
		}
		if got := line(t, c, r, "put 0 0 60 1\r\nx"); got != "UNAUTHORIZED" {
			t.Fatalf("put by a consumer = %q, want UNAUTHORIZED", got)
		}
	})
	t.Run("beanstalk without a certificate", func(t *testing.T) {
		c, r := dialBS(t, "")
		if got := line(t, c, r, "list-tubes"); got != "UNAUTHORIZED" {
			t.Fatalf("list-tubes = %q", got)
		}
	})
	t.Run("plain beanstalk from loopback on the same port", func(t *testing.T) {
		// Clients that cannot do TLS are trusted from this machine only.
		c, err := net.Dial("tcp", bs)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if got := line(t, c, bufio.NewReader(c), "stats"); !strings.HasPrefix(got, "OK ") {
			t.Fatalf("plain stats from loopback = %q", got)
		}
	})
	t.Run("plain beanstalk from elsewhere is nobody", func(t *testing.T) {
		a, b := net.Pipe()
		defer a.Close()
		defer b.Close()
		remote := &remoteConn{Conn: a, remote: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 5000}}
		if p := s.admitBeanstalk(t.Context(), remote); p != nil {
			t.Fatalf("a plain connection from 10.1.2.3 got %+v", p)
		}
	})
	t.Run("beanstalk with an unmapped certificate", func(t *testing.T) {
		c, r := dialBS(t, "stranger")
		if got := line(t, c, r, "stats"); got != "UNAUTHORIZED" {
			t.Fatalf("stats = %q", got)
		}
	})
}

// SIGHUP reloads the auth file: a token added to it works without a
// restart.
func TestSIGHUPReloadsTokens(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	os.WriteFile(cfg.AuthFile, mustRead(t, authFile(t, "rotated-token")), 0o600)
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _ := secCall(t, hc, "POST", s.URL()+"/v1/topics/orders/jobs", "rotated-token", "", `{"body":"x"}`)
		if status == 201 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the rotated token still answers %d after SIGHUP", status)
		}
		time.Sleep(5 * time.Millisecond) // polling for the reload to be seen
	}
}

// remoteConn is a connection that says it comes from remote.
type remoteConn struct {
	net.Conn
	remote net.Addr
}

func (c *remoteConn) RemoteAddr() net.Addr { return c.remote }
