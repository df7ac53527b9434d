package config

import (
	"errors"
	"fmt"
	"net"
	"strings"
	"time"
)

// Security holds who may use the server and how much any one client may
// cost it. docs/security.md explains each setting; the defaults are in
// DefaultSecurity. A zero limit means no bound.
type Security struct {
	// AuthFile is a JSON file of tokens (as SHA-256 hashes) and client
	// certificate names with their scopes and topic globs; reloaded on
	// SIGHUP. Default "": no file.
	AuthFile string
	// Auth is the same JSON given inline (from DELAYQ_AUTH, for platforms
	// that hand secrets over as environment variables). Default "".
	Auth string
	// InsecureListen lets a server without tokens listen beyond loopback.
	// Default false: without tokens it refuses to start on a non-loopback
	// address, since anyone who can reach it could read and delete jobs.
	InsecureListen bool
	// BeanstalkInsecureListen lets the beanstalkd listener accept plain
	// (not mutually authenticated) connections beyond loopback while
	// tokens are configured. beanstalkd clients cannot send a token, so
	// such connections are trusted with every scope. Default false.
	BeanstalkInsecureListen bool
	// AllowedHosts are the names the HTTP Host header may carry besides IP
	// addresses, localhost, the listen address and the advertised URL's
	// host ("*" any, ".example.com" any name under it). Default none.
	AllowedHosts []string

	// TLSCert and TLSKey, when set, serve both listeners over TLS; the
	// files are read again when they change. Default "": plain TCP.
	TLSCert, TLSKey string
	// TLSClientCA, when set, verifies client certificates against these
	// CAs (mutual TLS); a certificate's common name or DNS name maps to an
	// auth entry's client_names. Default "".
	TLSClientCA string

	// MaxHTTPConns bounds open HTTP connections; more are answered 503
	// too_many_connections and closed. Default 10,000.
	MaxHTTPConns int
	// MaxBeanstalkConns bounds open beanstalkd connections; more are
	// closed at once. Default 10,000.
	MaxBeanstalkConns int
	// MaxConnsPerClient bounds the connections of one client on each
	// listener: one remote address (IPv6: one /64) and, on the HTTP port,
	// one token. It is at most half of the listener's bound. A client at
	// its share may open another connection only in place of one of its
	// idle ones. Default 1,000.
	MaxConnsPerClient int
	// WriteTimeout cuts off an HTTP or gRPC answer whose client takes
	// none of a 64 KiB piece of it for this long (a client that stops
	// reading), giving back what the answer held. Default 30s.
	WriteTimeout time.Duration
	// BeanstalkIdleTimeout closes a beanstalkd connection that sends no
	// command for this long (a reserve waiting is not idle). Default 0:
	// never, as beanstalkd; set it when clients reconnect on their own.
	BeanstalkIdleTimeout time.Duration
	// MaxInflightBytes bounds the bytes of HTTP request bodies being read
	// and decoded at once, charged as they arrive (limits.Bytes); a
	// request that finds it spent waits up to InflightWait, then answers
	// 503 too_many_bytes_in_flight. Default 256 MiB.
	MaxInflightBytes int64
	// InflightWait is how long a request may wait for its share of
	// MaxInflightBytes. Default 5s.
	InflightWait time.Duration
	// MaxWaitingReserves bounds reserves long-polling at once (HTTP and
	// beanstalkd); more answer 503 too_many_waiting_reserves (beanstalkd
	// OUT_OF_MEMORY). Default 10,000.
	MaxWaitingReserves int
	// MaxTopics bounds the count of topics; a put that would make one more
	// answers 507 too_many_topics (beanstalkd OUT_OF_MEMORY). Default
	// 100,000.
	MaxTopics int
	// RateLimit is the requests per second each token may make (each
	// remote address, without tokens); over it HTTP answers 429
	// rate_limited and beanstalkd commands wait their turn. Default 0: no
	// bound.
	RateLimit float64
	// RateBurst is how many requests over RateLimit may come at once.
	// Default 100.
	RateBurst int
	// MaxAuthFailures is how many failed logins and unknown tokens one
	// remote address may send a minute; beyond it its logins and
	// requests with a token answer 429 rate_limited until one comes back.
	// Default 30.
	MaxAuthFailures int
	// MaxDashboardSessions bounds the dashboard sessions of one token; a
	// login beyond it ends that token's oldest session (and no other
	// token's). Default 20.
	MaxDashboardSessions int
}

// DefaultSecurity returns the documented defaults.
func DefaultSecurity() Security {
	return Security{
		MaxHTTPConns:         10_000,
		MaxBeanstalkConns:    10_000,
		MaxInflightBytes:     256 << 20,
		InflightWait:         5 * time.Second,
		MaxWaitingReserves:   10_000,
		MaxTopics:            100_000,
		RateBurst:            100,
		MaxConnsPerClient:    1_000,
		WriteTimeout:         30 * time.Second,
		MaxAuthFailures:      30,
		MaxDashboardSessions: 20,
	}
}

// validate adds the problems of s to Validate's list.
func (s Security) validate(add func(field, format string, args ...any)) {
	if (s.TLSCert == "") != (s.TLSKey == "") {
		add("tls-cert", "--tls-cert and --tls-key go together")
	}
	if s.TLSClientCA != "" && s.TLSCert == "" {
		add("tls-client-ca", "needs --tls-cert and --tls-key (mutual TLS is TLS first)")
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"max-http-conns", int64(s.MaxHTTPConns)}, {"max-beanstalk-conns", int64(s.MaxBeanstalkConns)},
		{"max-inflight-bytes", s.MaxInflightBytes}, {"max-waiting-reserves", int64(s.MaxWaitingReserves)},
		{"max-topics", int64(s.MaxTopics)}, {"rate-burst", int64(s.RateBurst)},
		{"max-conns-per-client", int64(s.MaxConnsPerClient)}, {"max-auth-failures", int64(s.MaxAuthFailures)},
		{"max-dashboard-sessions", int64(s.MaxDashboardSessions)},
	} {
		if f.v < 0 {
			add(f.name, "%d is negative (0 means no bound)", f.v)
		}
	}
	if s.BeanstalkIdleTimeout < 0 || s.InflightWait < 0 {
		add("beanstalk-idle-timeout", "durations must not be negative")
	}
	if s.WriteTimeout < 0 {
		add("write-timeout", "%v is negative (0 means no bound)", s.WriteTimeout)
	}
	if s.RateLimit < 0 {
		add("rate-limit", "%g is negative (0 means no bound)", s.RateLimit)
	}
}

// HasTokens reports whether an auth file or inline auth is configured.
func (c Config) HasTokens() bool {
	return c.AuthFile != "" || strings.TrimSpace(c.Auth) != ""
}

// CheckExposure refuses listeners that would hand the queue to anyone on
// the network: without tokens, any listener beyond loopback (unless
// InsecureListen); with tokens, a beanstalkd listener beyond loopback that
// cannot authenticate its clients (no mutual TLS) unless
// BeanstalkInsecureListen. It returns warnings to log for what it lets
// through on purpose.
func (c Config) CheckExposure() (warnings []string, err error) {
	var errs []error
	if !c.HasTokens() {
		for _, l := range [][2]string{{"http-addr", c.HTTPAddr}, {"beanstalk-addr", c.BeanstalkAddr}} {
			name, addr := l[0], l[1]
			if addr == "" || IsLoopback(addr) {
				continue
			}
			if !c.InsecureListen {
				errs = append(errs, fmt.Errorf("%s: %q is beyond loopback and no tokens are configured: anyone who reaches it could read and delete every job. Configure tokens (--auth-file) or pass --insecure-listen", name, addr))
			} else {
				warnings = append(warnings, fmt.Sprintf("%s %s is open to the network without tokens (--insecure-listen)", name, addr))
			}
		}
		return warnings, errors.Join(errs...)
	}
	if c.BeanstalkAddr != "" && !IsLoopback(c.BeanstalkAddr) && c.TLSClientCA == "" {
		if !c.BeanstalkInsecureListen {
			return nil, fmt.Errorf("beanstalk-addr: %q is beyond loopback, but beanstalkd clients cannot send tokens and no client CA is set (--tls-client-ca) to authenticate them by certificate. Set one, listen on loopback, or pass --beanstalk-insecure-listen", c.BeanstalkAddr)
		}
		warnings = append(warnings, fmt.Sprintf("beanstalk-addr %s trusts every connection with every scope (--beanstalk-insecure-listen)", c.BeanstalkAddr))
	}
	if c.TLSCert == "" && !IsLoopback(c.HTTPAddr) {
		warnings = append(warnings, fmt.Sprintf("http-addr %s is beyond loopback without TLS: tokens cross the network in the clear (--tls-cert, --tls-key)", c.HTTPAddr))
	}
	return warnings, nil
}

// IsLoopback reports whether addr's host is a loopback address or
// "localhost". An empty host (every interface) is not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
