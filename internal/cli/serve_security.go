package cli

import (
	"strconv"
	"time"

	"github.com/alecthomas/kong"

	"github.com/delayq/delayq/internal/config"
)

// securityFlags are serve's flags for authentication, TLS and limits
// (config.Security documents each; docs/security.md explains them).
type securityFlags struct {
	AuthFile                string   `name:"auth-file" env:"DELAYQ_AUTH_FILE" type:"path" group:"Security" help:"JSON file of tokens (SHA-256 hashes; see 'delayq token') and client certificate names, with scopes and topic globs. Reloaded on SIGHUP."`
	Auth                    string   `name:"auth" env:"DELAYQ_AUTH" group:"Security" help:"The auth file's JSON given inline (for secrets passed as environment variables)."`
	InsecureListen          bool     `name:"insecure-listen" env:"DELAYQ_INSECURE_LISTEN" group:"Security" help:"Listen beyond loopback without any token configured (anyone who can connect may do anything)."`
	BeanstalkInsecureListen bool     `name:"beanstalk-insecure-listen" env:"DELAYQ_BEANSTALK_INSECURE_LISTEN" group:"Security" help:"With tokens configured, accept plain beanstalkd connections beyond loopback and trust them with every scope."`
	AllowedHosts            []string `name:"allowed-hosts" env:"DELAYQ_ALLOWED_HOSTS" sep:"," group:"Security" help:"Host names HTTP requests may be addressed to, besides IP addresses, localhost, the listen and advertised hosts ('*' any, '.example.com' any under it)."`
	TLSCert                 string   `name:"tls-cert" env:"DELAYQ_TLS_CERT" type:"path" group:"Security" help:"PEM certificate chain: serve HTTP and beanstalkd over TLS (reloaded when the file changes or on SIGHUP)."`
	TLSKey                  string   `name:"tls-key" env:"DELAYQ_TLS_KEY" type:"path" group:"Security" help:"PEM private key of --tls-cert."`
	TLSClientCA             string   `name:"tls-client-ca" env:"DELAYQ_TLS_CLIENT_CA" type:"path" group:"Security" help:"PEM CA bundle that verifies client certificates (mutual TLS); a certificate's CN or DNS name maps to an auth entry's client_names."`

	MaxHTTPConns         int           `name:"max-http-conns" env:"DELAYQ_MAX_HTTP_CONNS" default:"${max_http_conns}" group:"Limits" help:"Most open HTTP connections (0: no bound)."`
	MaxBeanstalkConns    int           `name:"max-beanstalk-conns" env:"DELAYQ_MAX_BEANSTALK_CONNS" default:"${max_beanstalk_conns}" group:"Limits" help:"Most open beanstalkd connections (0: no bound)."`
	BeanstalkIdleTimeout time.Duration `name:"beanstalk-idle-timeout" env:"DELAYQ_BEANSTALK_IDLE_TIMEOUT" default:"${beanstalk_idle_timeout}" group:"Limits" help:"Close a beanstalkd connection idle this long (0: never, as beanstalkd)."`
	MaxInflightBytes     int64         `name:"max-inflight-bytes" env:"DELAYQ_MAX_INFLIGHT_BYTES" default:"${max_inflight_bytes}" group:"Limits" help:"Most HTTP request bytes held at once: bodies charged as they arrive, puts also what they decode into (0: no bound)."`
	InflightWait         time.Duration `name:"inflight-wait" env:"DELAYQ_INFLIGHT_WAIT" default:"${inflight_wait}" group:"Limits" help:"How long a request may wait for its share of --max-inflight-bytes."`
	MaxWaitingReserves   int           `name:"max-waiting-reserves" env:"DELAYQ_MAX_WAITING_RESERVES" default:"${max_waiting_reserves}" group:"Limits" help:"Most reserves long-polling at once (0: no bound)."`
	MaxTopics            int           `name:"max-topics" env:"DELAYQ_MAX_TOPICS" default:"${max_topics}" group:"Limits" help:"Most topics (0: no bound)."`
	RateLimit            float64       `name:"rate-limit" env:"DELAYQ_RATE_LIMIT" default:"${rate_limit}" group:"Limits" help:"Requests per second per token, or per address without tokens (0: no bound)."`
	RateBurst            int           `name:"rate-burst" env:"DELAYQ_RATE_BURST" default:"${rate_burst}" group:"Limits" help:"Requests over --rate-limit allowed at once."`
	MaxConnsPerClient    int           `name:"max-conns-per-client" env:"DELAYQ_MAX_CONNS_PER_CLIENT" default:"${max_conns_per_client}" group:"Limits" help:"Most connections of one address (IPv6: /64), and on HTTP of one token, per listener; at most half the listener's bound (0: half)."`
	WriteTimeout         time.Duration `name:"write-timeout" env:"DELAYQ_WRITE_TIMEOUT" default:"${write_timeout}" group:"Limits" help:"Cut off an HTTP/gRPC answer whose client takes none of a 64 KiB piece for this long (0: only the request's overall bound)."`
	MaxAuthFailures      int           `name:"max-auth-failures" env:"DELAYQ_MAX_AUTH_FAILURES" default:"${max_auth_failures}" group:"Limits" help:"Failed logins and unknown tokens per address a minute; more answer 429 (0: no bound)."`
	MaxDashboardSessions int           `name:"max-dashboard-sessions" env:"DELAYQ_MAX_DASHBOARD_SESSIONS" default:"${max_dashboard_sessions}" group:"Limits" help:"Dashboard sessions per token; a login beyond it ends that token's oldest (0: no bound)."`
}

// config returns the flags as a config.Security.
func (f *securityFlags) config() config.Security {
	return config.Security{
		AuthFile: f.AuthFile, Auth: f.Auth,
		InsecureListen: f.InsecureListen, BeanstalkInsecureListen: f.BeanstalkInsecureListen,
		AllowedHosts: f.AllowedHosts,
		TLSCert:      f.TLSCert, TLSKey: f.TLSKey, TLSClientCA: f.TLSClientCA,
		MaxHTTPConns: f.MaxHTTPConns, MaxBeanstalkConns: f.MaxBeanstalkConns,
		BeanstalkIdleTimeout: f.BeanstalkIdleTimeout,
		MaxInflightBytes:     f.MaxInflightBytes, InflightWait: f.InflightWait,
		MaxWaitingReserves: f.MaxWaitingReserves, MaxTopics: f.MaxTopics,
		RateLimit: f.RateLimit, RateBurst: f.RateBurst,
		MaxConnsPerClient: f.MaxConnsPerClient, WriteTimeout: f.WriteTimeout,
		MaxAuthFailures: f.MaxAuthFailures, MaxDashboardSessions: f.MaxDashboardSessions,
	}
}

// securityVars feeds config.DefaultSecurity into the flags' defaults.
func securityVars() kong.Vars {
	d := config.DefaultSecurity()
	return kong.Vars{
		"max_http_conns":         strconv.Itoa(d.MaxHTTPConns),
		"max_beanstalk_conns":    strconv.Itoa(d.MaxBeanstalkConns),
		"beanstalk_idle_timeout": d.BeanstalkIdleTimeout.String(),
		"max_inflight_bytes":     strconv.FormatInt(d.MaxInflightBytes, 10),
		"inflight_wait":          d.InflightWait.String(),
		"max_waiting_reserves":   strconv.Itoa(d.MaxWaitingReserves),
		"max_topics":             strconv.Itoa(d.MaxTopics),
		"rate_limit":             strconv.FormatFloat(d.RateLimit, 'g', -1, 64),
		"rate_burst":             strconv.Itoa(d.RateBurst),
		"max_conns_per_client":   strconv.Itoa(d.MaxConnsPerClient),
		"write_timeout":          d.WriteTimeout.String(),
		"max_auth_failures":      strconv.Itoa(d.MaxAuthFailures),
		"max_dashboard_sessions": strconv.Itoa(d.MaxDashboardSessions),
	}
}
