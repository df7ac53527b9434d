// Package config holds the settings of a delayq server: the Config struct,
// its documented defaults and units, and Validate, which reports every
// problem at once. It does not parse flags or environment variables (package
// cli does, with the defaults taken from Default) and starts nothing
// (package server does).
package config

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/redact"
)

// Bounds enforced by Validate. They guard against typos (a MaxWait of 5h
// meant as 5m would keep HTTP write timeouts open for hours), not against
// deliberate choices within reason.
const (
	MaxBodyLimit    = 64 << 20 // bytes; a body larger than this belongs in blob storage
	MaxWaitLimit    = time.Hour
	MaxTopicsLimit  = 100_000
	MaxShutdownWait = 10 * time.Minute
	MaxCacheMiB     = 1 << 20 // 1 TiB
	MinCacheMiB     = 8
	// The alarm evaluation interval's range: each evaluation reads every
	// topic's counts, so not more often than every 100 ms; an alarm an
	// hour late is no alarm.
	MinAlarmInterval = 100 * time.Millisecond
	MaxAlarmInterval = time.Hour
	// The fsync window's range: under a millisecond the background sync
	// would run as often as the default mode's; over a minute is a window
	// no operator means.
	MinFsyncWindow = time.Millisecond
	MaxFsyncWindow = time.Minute
)

// Config is everything a delayq server needs to start. The zero value is not
// usable: start from Default and override.
type Config struct {
	// HTTPAddr is the host:port the HTTP/JSON API listens on. Default
	// "127.0.0.1:7480"; port 0 picks a free port.
	HTTPAddr string
	// DataDir is the directory of the embedded store; created if missing.
	// Default "./delayq-data".
	DataDir string
	// CacheMiB is the embedded store's block cache (Pebble), in MiB. It
	// holds the records and index blocks that reserves and finishes read;
	// it fills only as blocks are read, so far-future jobs never fill it.
	// Default 128: against 64, a burst of 100k jobs drained 25% faster.
	// Ignored with Redis and Postgres.
	CacheMiB int
	// HotMiB bounds the job records the embedded store keeps in memory
	// beside its ready, reserved and near-future jobs, so reserve, finish
	// and the timer read nothing from disk; records beyond it are read
	// from disk when needed. Default 128; 0 keeps none. Ignored with
	// Redis and Postgres.
	HotMiB int
	// MinFreeMiB is the free disk space below which the embedded store
	// refuses new jobs (HTTP 507 disk_full, beanstalkd OUT_OF_MEMORY)
	// while it keeps serving the jobs it has. Default 256; 0 turns the
	// check off. Ignored with Redis and Postgres.
	MinFreeMiB int
	// Fsync is the embedded store's fsync window. Zero (--fsync always,
	// the default) answers a transition only after its write is durable
	// (fdatasync), with concurrent transitions sharing each sync. A
	// positive window answers once the write has reached the operating
	// system, so a kill -9 loses nothing acknowledged, and fdatasyncs at
	// least that often, so a power loss or kernel crash loses at most
	// that window (beanstalkd -f, Redis appendfsync everysec). Between
	// MinFsyncWindow and MaxFsyncWindow. Not valid with Redis, whose own
	// appendfsync setting governs.
	Fsync time.Duration
	// BallastMiB is the file the embedded store keeps in its data
	// directory and releases when the disk is full, so that it can still
	// reopen and take reserves, finishes and deletes. Default 64; 0 keeps
	// none. Ignored with Redis and Postgres.
	BallastMiB int
	// Retain is how long a job that ended (finished, deleted, or failed
	// for good) stays readable with its attempts, and its id taken so a
	// retried put is refused as a duplicate (the idempotency window).
	// Default 1h; 0 keeps none.
	Retain time.Duration
	// RetainBodies keeps the retained jobs' bodies; without it they are
	// kept without one. Default true.
	RetainBodies bool
	// MaxBody is the largest job body, in bytes. Default 65,535
	// (beanstalkd's max-job-size); at most MaxBodyLimit.
	MaxBody int
	// MaxWait is the longest a reserve may long-poll. Default 5m; at most
	// MaxWaitLimit.
	MaxWait time.Duration
	// MaxReserveTopics is the most topics one reserve may list. Default
	// 1,000.
	MaxReserveTopics int
	// AdvertiseURL is the base URL other instances and clients use to reach
	// this one (GET /v1/cluster). Default: derived from the HTTP listen
	// address once it is bound (see AdvertiseURLFor).
	AdvertiseURL string
	// ShutdownTimeout bounds a graceful shutdown: in-flight requests that
	// have not finished by then are cut off. Default 30s.
	ShutdownTimeout time.Duration
	// AlarmInterval is the time between two evaluations of the alarms
	// (package alarm). Default 10s (also when 0); at least
	// MinAlarmInterval.
	AlarmInterval time.Duration
	// MetricsMaxTopics is how many topics have their own topic label
	// value in /metrics; the others are summed under topic="_other", so a
	// deployment's series stay bounded whatever its topics. Default 100;
	// 0 names none; at most MaxTopicsLimit.
	MetricsMaxTopics int
	// WebhookAllowNets are the networks (CIDR, or a single address)
	// alarm events may be sent to besides public addresses: loopback,
	// private, link-local and other special-purpose addresses are
	// refused, when an alarm is created and again when each connection
	// is made (package alarm). Default none.
	WebhookAllowNets []string
	// LogLevel is debug, info, warn or error. Default info.
	LogLevel string
	// LogFormat is text (logfmt-like, for people) or json (for log
	// pipelines). Default text.
	LogFormat string
	// AccessLog logs one record per HTTP request (method, route, status,
	// bytes, duration, principal, remote address). Default off.
	AccessLog bool

	// BeanstalkAddr is the host:port the beanstalkd protocol listens on.
	// Default "127.0.0.1:11300"; "" disables it; port 0 picks a free port.
	BeanstalkAddr string

	// DebugAddr is the host:port of a listener serving Go's profiler
	// (net/http/pprof under /debug/pprof/), kept off the API port so it is
	// never exposed by accident. It has no authentication: keep it on
	// loopback. Default "": off.
	DebugAddr string

	// Redis, when set, is the Redis the instance keeps its state in
	// (redis://, rediss://, ?addr= for Cluster seeds, master_set= for
	// Sentinel); DataDir is then ignored. Default "": the embedded store.
	Redis string
	// RedisSettings tune the Redis backend (redis.go).
	RedisSettings

	// Postgres, when set, is the PostgreSQL database the instance keeps
	// its state in (postgres://user:pass@host:port/db?..., several hosts
	// with target_session_attrs=read-write to follow a failover);
	// DataDir is then ignored. Not with Redis. Default "".
	Postgres string
	// PostgresSettings tune the Postgres backend (postgres.go).
	PostgresSettings

	// Security is authentication, TLS and the per-client limits
	// (security.go).
	Security
}

// Default returns the configuration a plain `delayq serve` runs with.
func Default() Config {
	return Config{
		HTTPAddr:         "127.0.0.1:7480",
		BeanstalkAddr:    "127.0.0.1:11300",
		DataDir:          "./delayq-data",
		CacheMiB:         128,
		HotMiB:           128,
		MinFreeMiB:       256,
		BallastMiB:       64,
		MaxBody:          delayq.MaxBodyDefault,
		Retain:           time.Hour,
		RetainBodies:     true,
		MaxWait:          delayq.MaxWaitDefault,
		MaxReserveTopics: 1000,
		ShutdownTimeout:  30 * time.Second,
		AlarmInterval:    10 * time.Second,
		MetricsMaxTopics: 100,
		LogLevel:         "info",
		LogFormat:        "text",
		Security:         DefaultSecurity(),
		RedisSettings:    DefaultRedisSettings(),
		PostgresSettings: DefaultPostgresSettings(),
	}
}

// Validate reports every problem in c at once, joined, so an operator fixes
// a bad deployment in one round instead of one flag per restart.
func (c Config) Validate() error {
	var errs []error
	add := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: "+format, append([]any{field}, args...)...))
	}
	if err := checkAddr(c.HTTPAddr); err != nil {
		add("http-addr", "%v", err)
	}
	if c.BeanstalkAddr != "" {
		if err := checkAddr(c.BeanstalkAddr); err != nil {
			add("beanstalk-addr", "%v", err)
		}
	}
	if c.DebugAddr != "" {
		if err := checkAddr(c.DebugAddr); err != nil {
			add("debug-addr", "%v", err)
		}
	}
	if c.Redis != "" {
		if u, err := url.Parse(c.Redis); err != nil || (u.Scheme != "redis" && u.Scheme != "rediss") {
			add("redis", "%q is not a redis:// or rediss:// URL", redact.String(c.Redis))
		}
	}
	if c.Postgres != "" {
		if c.Redis != "" {
			add("postgres", "set together with --redis: pick one store")
		} else if err := checkPostgresURL(c.Postgres); err != nil {
			add("postgres", "not a PostgreSQL connection string (postgres://user@host:port/db?...): %v", redact.Error(errors.Unwrap(err)))
		}
	}
	if c.AlarmInterval != 0 && (c.AlarmInterval < MinAlarmInterval || c.AlarmInterval > MaxAlarmInterval) {
		add("alarm-interval", "%s is out of range (%s to %s)", c.AlarmInterval, MinAlarmInterval, MaxAlarmInterval)
	}
	if c.MetricsMaxTopics < 0 || c.MetricsMaxTopics > MaxTopicsLimit {
		add("metrics-max-topics", "%d is out of range (0 to %d)", c.MetricsMaxTopics, MaxTopicsLimit)
	}
	if _, err := ParseNets(c.WebhookAllowNets); err != nil {
		add("webhook-allow-nets", "%v", err)
	}
	if strings.TrimSpace(c.DataDir) == "" && c.embedded() {
		add("data-dir", "must not be empty")
	}
	if c.embedded() && (c.CacheMiB < MinCacheMiB || c.CacheMiB > MaxCacheMiB) {
		add("cache-mib", "%d is out of range (%d to %d MiB)", c.CacheMiB, MinCacheMiB, MaxCacheMiB)
	}
	if c.embedded() && (c.HotMiB < 0 || c.HotMiB > MaxCacheMiB) {
		add("hot-mib", "%d is out of range (0 to %d MiB)", c.HotMiB, MaxCacheMiB)
	}
	if c.Fsync != 0 && c.Redis != "" {
		add("fsync", "does not apply with --redis: Redis's own appendfsync setting governs durability there (leave --fsync at always)")
	} else if c.Fsync != 0 && c.Postgres != "" {
		add("fsync", "does not apply with --postgres: PostgreSQL's own synchronous_commit governs durability there (leave --fsync at always)")
	} else if c.Fsync != 0 && (c.Fsync < MinFsyncWindow || c.Fsync > MaxFsyncWindow) {
		add("fsync", "%s is out of range (always, or %s to %s)", c.Fsync, MinFsyncWindow, MaxFsyncWindow)
	}
	if c.embedded() && (c.MinFreeMiB < 0 || c.MinFreeMiB > MaxCacheMiB*1024) {
		add("min-free-mib", "%d is out of range (0 to %d MiB)", c.MinFreeMiB, MaxCacheMiB*1024)
	}
	if c.embedded() && (c.BallastMiB < 0 || c.BallastMiB > MaxCacheMiB) {
		add("ballast-mib", "%d is out of range (0 to %d MiB)", c.BallastMiB, MaxCacheMiB)
	}
	if c.MaxBody < 1 || c.MaxBody > MaxBodyLimit {
		add("max-body", "%d is out of range (1 to %d bytes)", c.MaxBody, MaxBodyLimit)
	}
	if c.Retain < 0 {
		add("retain", "%v is negative (0 keeps no ended job)", c.Retain)
	}
	if c.MaxWait <= 0 || c.MaxWait > MaxWaitLimit {
		add("max-wait", "%v is out of range (more than 0, at most %v)", c.MaxWait, MaxWaitLimit)
	}
	if c.MaxReserveTopics < 1 || c.MaxReserveTopics > MaxTopicsLimit {
		add("max-reserve-topics", "%d is out of range (1 to %d)", c.MaxReserveTopics, MaxTopicsLimit)
	}
	if c.AdvertiseURL != "" {
		if err := checkURL(c.AdvertiseURL); err != nil {
			add("advertise-url", "%v", err)
		}
	}
	if c.ShutdownTimeout <= 0 || c.ShutdownTimeout > MaxShutdownWait {
		add("shutdown-timeout", "%v is out of range (more than 0, at most %v)", c.ShutdownTimeout, MaxShutdownWait)
	}
	if _, err := ParseLevel(c.LogLevel); err != nil {
		add("log-level", "%v", err)
	}
	if c.LogFormat != "text" && c.LogFormat != "json" {
		add("log-format", "%q is not text or json", c.LogFormat)
	}
	c.Security.validate(add)
	if c.Redis != "" {
		c.RedisSettings.validate(add)
	}
	if c.Postgres != "" {
		c.PostgresSettings.validate(add)
	}
	return errors.Join(errs...)
}

// embedded reports whether c keeps its state in the embedded store
// (DataDir), neither Redis nor Postgres.
func (c Config) embedded() bool { return c.Redis == "" && c.Postgres == "" }

// checkAddr accepts host:port with a numeric port 0-65535 (port 0 picks a
// free port). The host may be empty (all interfaces).
func checkAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has no valid port (0-65535)", addr)
	}
	return nil
}

func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL with a host", s)
	}
	return nil
}

// ParseLevel maps debug, info, warn and error to slog levels.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info", "":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("%q is not debug, info, warn or error", s)
}

// AdvertiseURLFor returns c.AdvertiseURL, or, when it is empty, a base URL
// built from bound, the address the HTTP listener actually got (so port 0
// advertises the real port). A wildcard host (0.0.0.0, ::, empty) cannot be
// dialled by anyone else, so the machine's hostname stands in for it.
func (c Config) AdvertiseURLFor(bound net.Addr) string {
	if c.AdvertiseURL != "" {
		return strings.TrimRight(c.AdvertiseURL, "/")
	}
	host, port, err := net.SplitHostPort(bound.String())
	if err != nil {
		return "http://" + bound.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
		if h, err := os.Hostname(); err == nil && h != "" {
			host = h
		}
	}
	return "http://" + net.JoinHostPort(host, port)
}

// NewLogger returns the logger c asks for, writing to w. Call it after
// Validate; an unknown level falls back to info.
func (c Config) NewLogger(w io.Writer) *slog.Logger {
	level, _ := ParseLevel(c.LogLevel)
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationString}
	if c.LogFormat == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// durationString writes every duration as Go writes it ("1.5s", "250µs"):
// the JSON handler would write nanoseconds, a number nobody reads as a
// time. It applies to every record, attributes in groups included.
func durationString(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// ParseNets parses networks written as CIDR (10.0.0.0/8, fd00::/8) or
// as one address (127.0.0.1, ::1), reporting the first that is neither.
func ParseNets(nets []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(nets))
	for _, n := range nets {
		n = strings.TrimSpace(n)
		if p, err := netip.ParsePrefix(n); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(n)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a network (10.0.0.0/8) nor an address (127.0.0.1)", n)
		}
		out = append(out, netip.PrefixFrom(a.Unmap().WithZone(""), a.Unmap().BitLen()))
	}
	return out, nil
}
