package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sync/errgroup"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/audit"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/beanstalk"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/limits"
	"github.com/delayq/delayq/internal/tlsconf"
)

// security is what the server checks before a request reaches the API or
// a command the engine: tokens, TLS, and the per-client limits. Built by
// setupSecurity from cfg.Security; docs/security.md describes it.
type security struct {
	auth   *auth.Store       // nil: no tokens, every caller may do everything
	tls    *tlsconf.Reloader // nil: plain TCP
	bytes  *limits.Bytes     // nil: no bound
	rates  *limits.Rates     // nil: no bound
	fails  *limits.Rates     // failed logins and unknown tokens per address; nil: no bound
	conns  *limits.Listener  // the HTTP listener's connection bounds
	bconns *limits.Listener  // the beanstalkd listener's bound per client; nil when it is off
}

// setupSecurity loads the tokens and certificates and refuses listen
// addresses that would expose the queue (config.CheckExposure), logging
// what it lets through on purpose. It runs before the store opens, so a
// bad file fails fast.
func (s *Server) setupSecurity() error {
	warnings, err := s.cfg.CheckExposure()
	if err != nil {
		return fmt.Errorf("server: refusing to start:\n%w", err)
	}
	for _, w := range warnings {
		s.log.Warn("insecure listener: " + w)
	}
	sec := &s.sec
	if sec.auth, err = auth.Load(s.cfg.AuthFile, s.cfg.Auth); err != nil {
		return fmt.Errorf("server: %w", err)
	}
	if sec.auth == nil {
		s.log.Info("no tokens configured: every client may do everything (listeners on loopback only, unless --insecure-listen)")
	} else {
		s.log.Info("tokens loaded", "entries", sec.auth.Len(), "auth_file", s.cfg.AuthFile)
	}
	if s.cfg.TLSCert != "" {
		sec.tls, err = tlsconf.New(tlsconf.Files{Cert: s.cfg.TLSCert, Key: s.cfg.TLSKey, ClientCA: s.cfg.TLSClientCA})
		if err != nil {
			return fmt.Errorf("server: %w", err)
		}
		s.log.Info("TLS on", "cert", s.cfg.TLSCert, "client_ca", s.cfg.TLSClientCA)
	}
	sec.bytes = limits.NewBytes(s.cfg.MaxInflightBytes, s.cfg.InflightWait)
	sec.rates = limits.NewRates(s.cfg.RateLimit, s.cfg.RateBurst)
	sec.fails = limits.NewFailures(s.cfg.MaxAuthFailures)
	return nil
}

// secureHTTP wraps the HTTP listener: the connection bounds in all and
// per client (answering 503 too_many_connections over them), then TLS.
// A connection must begin its first request within readHeaderTimeout,
// as HTTP/1 must send its first request's headers: an HTTP/2 client
// that sends only its preface is otherwise kept until the idle timeout.
func (s *Server) secureHTTP(l net.Listener) net.Listener {
	tlsOn := s.sec.tls != nil
	s.sec.conns = limits.ConnListener(l, limits.ConnOptions{
		Max: s.cfg.MaxHTTPConns, PerClient: s.cfg.MaxConnsPerClient, Reclaim: true, FirstRequest: readHeaderTimeout,
		Refuse: func(c net.Conn, why string) {
			s.log.Warn("http connection refused: "+why, "remote", c.RemoteAddr().String(),
				"max_http_conns", s.cfg.MaxHTTPConns, "max_conns_per_client", s.sec.conns.Share())
			if !tlsOn { // a TLS client could not read a plain answer
				io.WriteString(c, tooManyConns(why))
			}
		},
	})
	if tlsOn {
		// HTTP/2 first: gRPC clients need it (grpc.go).
		return tls.NewListener(s.sec.conns, s.sec.tls.Config("h2", "http/1.1"))
	}
	return s.sec.conns
}

// tooManyConns is the whole answer to a connection over the connection
// bounds; why says which.
func tooManyConns(why string) string {
	body := `{"error":{"code":"` + api.CodeTooManyConns + `","message":` + strconv.Quote(why+" (--max-http-conns, --max-conns-per-client); retry later") + `}}` + "\n"
	return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: 1\r\nConnection: close\r\n" +
		fmt.Sprintf("Content-Length: %d\r\n\r\n", len(body)) + body
}

// secureBeanstalk serves TLS on the beanstalkd listener when it is on,
// beside plain TCP for clients that cannot do TLS (sniff.go).
func (s *Server) secureBeanstalk(l net.Listener) net.Listener {
	// The bound per client; the bound in all is the beanstalkd server's
	// own (guardBeanstalk). Idle connections are not reclaimed: they hold
	// their watched tubes and reserved jobs.
	s.sec.bconns = limits.ConnListener(l, limits.ConnOptions{
		PerClient: beanstalkShare(s.cfg.MaxConnsPerClient, s.cfg.MaxBeanstalkConns),
		Refuse: func(c net.Conn, why string) {
			s.log.Warn("beanstalk connection refused: "+why, "remote", c.RemoteAddr().String(), "max_conns_per_client", s.sec.bconns.Share())
		},
	})
	l = s.sec.bconns
	if s.sec.tls != nil {
		return &sniffListener{Listener: l, cfg: s.sec.tls.Config()}
	}
	return l
}

// beanstalkShare is the most beanstalkd connections one client may hold:
// perClient, at most half of the listener's bound (as limits.ConnListener
// takes it for a listener it bounds in all).
func beanstalkShare(perClient, maxConns int) int {
	if maxConns > 0 && (perClient <= 0 || perClient > max(1, maxConns/2)) {
		return max(1, maxConns/2)
	}
	return perClient
}

// guardBeanstalk sets the beanstalkd server's limits and its Admit hook.
func (s *Server) guardBeanstalk(b *beanstalk.Server) {
	maxConns := s.cfg.MaxBeanstalkConns
	if maxConns == 0 {
		maxConns = math.MaxInt // 0 means no bound here; beanstalk's own zero means its default
	}
	b.Limits.MaxConns = maxConns
	b.Limits.IdleTimeout = s.cfg.BeanstalkIdleTimeout
	b.Rates = s.sec.rates
	if s.sec.auth != nil {
		b.Admit = s.admitBeanstalk
	}
}

// admitBeanstalk names a beanstalkd connection's principal. Over TLS, a
// verified client certificate maps to its auth entry; without one (or
// unmapped) the connection is nobody. A plain connection cannot say who it
// is, so it is trusted only when it comes from this machine (a loopback
// peer) or the operator opted out with --beanstalk-insecure-listen; from
// anywhere else it is nobody.
func (s *Server) admitBeanstalk(_ context.Context, nc net.Conn) *auth.Principal {
	if sc, ok := nc.(*sniffConn); ok && sc.TLS() != nil {
		if st := sc.TLS().ConnectionState(); len(st.VerifiedChains) > 0 {
			return s.sec.auth.ByCert(st.PeerCertificates[0])
		}
		return nil
	}
	if config.IsLoopback(nc.RemoteAddr().String()) || s.cfg.BeanstalkInsecureListen {
		return auth.Open
	}
	return nil
}

// guardHTTP wraps the API handler in httpapi.Guard.
func (s *Server) guardHTTP(h http.Handler) http.Handler {
	if b := s.sec.bytes; b != nil {
		s.eng.Metrics().WatchInflight(b.InFlight, b.Peak, b.Refused)
	}
	return httpapi.Guard(s.eng, h, httpapi.GuardOptions{
		Auth:     s.sec.auth,
		Hosts:    httpapi.NewHostPolicy(s.allowedHosts()),
		Rates:    s.sec.rates,
		Failures: s.sec.fails,
		Bytes:    s.sec.bytes,
		Logger:   s.log.With("component", "http"),
		// The same logins the API's POST /v1/session makes.
		Sessions: s.sessions,
	})
}

// allowedHosts are --allowed-hosts plus the names the server is known by:
// the listen host, the advertised URL's host and the machine's name.
func (s *Server) allowedHosts() []string {
	names := append([]string{}, s.cfg.AllowedHosts...)
	if h, _, err := net.SplitHostPort(s.cfg.HTTPAddr); err == nil && h != "" {
		names = append(names, h)
	}
	if u, err := url.Parse(s.advertise); err == nil && u.Hostname() != "" {
		names = append(names, u.Hostname())
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		names = append(names, h)
	}
	return names
}

// advertiseScheme makes the derived advertised URL https:// when TLS is on.
func (s *Server) advertiseScheme(u string) string {
	if s.sec.tls != nil && s.cfg.AdvertiseURL == "" {
		return "https://" + strings.TrimPrefix(u, "http://")
	}
	return u
}

// Reload reads the auth file and the certificates again, as SIGHUP does.
// On error the previous ones stay in force.
func (s *Server) Reload() error {
	var errs []error
	// Reloads come from a signal, sent by whoever runs the process.
	actor := &audit.Actor{Principal: "system", Protocol: "signal"}
	auditReload := func(action, target string, err error, extra ...slog.Attr) {
		if err != nil {
			extra = append(extra, slog.String("err", err.Error()))
		}
		audit.Log(context.Background(), s.log, actor, action, target, audit.Outcome(err), extra...)
	}
	if s.sec.auth != nil {
		if err := s.sec.auth.Reload(); err != nil {
			errs = append(errs, err)
			auditReload("tokens.reload", s.cfg.AuthFile, err)
		} else {
			s.log.Info("tokens reloaded", "entries", s.sec.auth.Len())
			auditReload("tokens.reload", s.cfg.AuthFile, nil, slog.Int("entries", s.sec.auth.Len()))
		}
	}
	if s.sec.tls != nil {
		if err := s.sec.tls.Reload(); err != nil {
			errs = append(errs, err)
			auditReload("certificates.reload", s.cfg.TLSCert, err)
		} else {
			s.log.Info("certificates reloaded")
			auditReload("certificates.reload", s.cfg.TLSCert, nil)
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		s.log.Error("reload failed; the previous tokens and certificates stay in force", "err", err)
	}
	return err
}

// reloadOnSIGHUP calls Reload on every SIGHUP until ctx ends. The signal
// is caught from the moment it returns (a SIGHUP not caught would kill the
// process).
func (s *Server) reloadOnSIGHUP(g *errgroup.Group, ctx context.Context) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	g.Go(func() error {
		defer signal.Stop(ch)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-ch:
				s.log.Info("SIGHUP: reloading tokens and certificates")
				_ = s.Reload()
			}
		}
	})
}
