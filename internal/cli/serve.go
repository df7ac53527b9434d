package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/alecthomas/kong"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/server"
)

// serveCmd is `delayq serve`. Every flag can also be set by the
// environment variable named in its env tag; a flag given on the command
// line wins.
type serveCmd struct {
	HTTPAddr         string        `name:"http-addr" env:"DELAYQ_HTTP_ADDR" default:"${http_addr}" help:"host:port of the HTTP API (port 0 picks a free port)."`
	DataDir          string        `name:"data-dir" env:"DELAYQ_DATA_DIR" default:"${data_dir}" type:"path" help:"Directory of the embedded store (created if missing)."`
	CacheMiB         int           `name:"cache-mib" env:"DELAYQ_CACHE_MIB" default:"${cache_mib}" help:"Block cache of the embedded store, in MiB (fills only with what reserves and finishes read)."`
	HotMiB           int           `name:"hot-mib" env:"DELAYQ_HOT_MIB" default:"${hot_mib}" help:"Job records the embedded store keeps in memory beside its ready, reserved and near-future jobs, in MiB (0 keeps none)."`
	MinFreeMiB       int           `name:"min-free-mib" env:"DELAYQ_MIN_FREE_MIB" default:"${min_free_mib}" help:"Free disk space below which new jobs are refused (disk_full) while existing ones are still served, in MiB (0 turns the check off)."`
	Fsync            fsyncFlag     `name:"fsync" env:"DELAYQ_FSYNC" default:"always" help:"always: answer each write once it is fsynced (the default). A duration such as 50ms: answer once the write reaches the operating system (a kill -9 loses nothing) and fsync at least that often (a power loss loses at most that window), like beanstalkd -f and Redis appendfsync everysec. Not with --redis (Redis's appendfsync governs) or --postgres (synchronous_commit governs)."`
	BallastMiB       int           `name:"ballast-mib" env:"DELAYQ_BALLAST_MIB" default:"${ballast_mib}" help:"Disk space the embedded store holds in reserve (a file in the data directory) and releases when the disk is full, so reserves, finishes and deletes keep working, in MiB (0 keeps none)."`
	MaxBody          int           `name:"max-body" env:"DELAYQ_MAX_BODY" default:"${max_body}" help:"Largest job body, in bytes."`
	Retain           time.Duration `name:"retain" env:"DELAYQ_RETAIN" default:"${retain}" help:"How long a job that ended (finished, deleted, or failed for good) stays readable with its attempts, and its id refused to a new put (0 keeps none)."`
	RetainBodies     bool          `name:"retain-bodies" env:"DELAYQ_RETAIN_BODIES" default:"${retain_bodies}" negatable:"" help:"Keep the bodies of the ended jobs --retain keeps (--retain-bodies=false or --no-retain-bodies keeps them without)."`
	MaxWait          time.Duration `name:"max-wait" env:"DELAYQ_MAX_WAIT" default:"${max_wait}" help:"Longest a reserve may long-poll."`
	MaxReserveTopics int           `name:"max-reserve-topics" env:"DELAYQ_MAX_RESERVE_TOPICS" default:"${max_reserve_topics}" help:"Most topics one reserve may list."`
	AdvertiseURL     string        `name:"advertise-url" env:"DELAYQ_ADVERTISE_URL" help:"Base URL clients use to reach this instance (default: from the listen address)."`
	ShutdownTimeout  time.Duration `name:"shutdown-timeout" env:"DELAYQ_SHUTDOWN_TIMEOUT" default:"${shutdown_timeout}" help:"How long a graceful shutdown may wait for in-flight requests."`
	AlarmInterval    time.Duration `name:"alarm-interval" env:"DELAYQ_ALARM_INTERVAL" default:"${alarm_interval}" help:"Time between two evaluations of the alarms."`
	MetricsMaxTopics int           `name:"metrics-max-topics" env:"DELAYQ_METRICS_MAX_TOPICS" default:"${metrics_max_topics}" help:"Topics with their own topic label in /metrics (the first seen that still live); the rest are summed under topic=\"_other\"."`
	WebhookAllowNets []string      `name:"webhook-allow-nets" env:"DELAYQ_WEBHOOK_ALLOW_NETS" help:"Networks (CIDR or single addresses, comma-separated) alarm webhooks may be sent to besides public addresses; loopback, private and link-local addresses are refused otherwise (e.g. 10.20.0.0/16,127.0.0.1)."`
	LogLevel         string        `name:"log-level" env:"DELAYQ_LOG_LEVEL" default:"${log_level}" enum:"debug,info,warn,error" help:"debug, info, warn or error."`
	LogFormat        string        `name:"log-format" env:"DELAYQ_LOG_FORMAT" default:"${log_format}" enum:"text,json" help:"text or json."`
	AccessLog        bool          `name:"access-log" env:"DELAYQ_ACCESS_LOG" help:"Log one record per HTTP request: method, route, status, bytes, duration, principal, remote address."`

	BeanstalkAddr string `name:"beanstalk-addr" env:"DELAYQ_BEANSTALK_ADDR" default:"${beanstalk_addr}" help:"host:port of the beanstalkd protocol (empty disables it)."`
	DebugAddr     string `name:"debug-addr" env:"DELAYQ_DEBUG_ADDR" help:"host:port serving Go's profiler at /debug/pprof/ (off by default; no authentication, keep it on loopback)."`
	Redis         string `name:"redis" env:"DELAYQ_REDIS" help:"Keep state in Redis instead of --data-dir: redis://host:port/db, rediss://..., ?addr=h:p for more Cluster seeds, ?master_set=name for Sentinel."`
	Postgres      string `name:"postgres" env:"DELAYQ_POSTGRES" help:"Keep state in PostgreSQL instead of --data-dir: postgres://user:pass@host:port/db?..., several hosts (host=a,b) with target_session_attrs=read-write to follow a failover. Applications can then put jobs inside their own transactions (docs/postgres.md)."`

	securityFlags `embed:""`
	redisFlags    `embed:""`
	postgresFlags `embed:""`

	// The config file (serve_config.go): every flag above is also a key.
	Config string      `name:"config" env:"DELAYQ_CONFIG" type:"path" group:"Config file" help:"TOML file of serve settings, each key a flag's name (max-body = 1048576). A flag or DELAYQ_* variable wins over the file."`
	Check  bool        `name:"check" group:"Config file" help:"Check the settings (flags, environment, --config), print the effective ones with secrets masked, and exit without starting."`
	file   *configFile `kong:"-"` // the parsed --config, set by BeforeResolve
}

// config turns the flags into a server configuration.
func (c *serveCmd) config() config.Config {
	return config.Config{
		HTTPAddr:         c.HTTPAddr,
		BeanstalkAddr:    c.BeanstalkAddr,
		Redis:            c.Redis,
		Postgres:         c.Postgres,
		DebugAddr:        c.DebugAddr,
		DataDir:          c.DataDir,
		CacheMiB:         c.CacheMiB,
		HotMiB:           c.HotMiB,
		MinFreeMiB:       c.MinFreeMiB,
		Fsync:            time.Duration(c.Fsync),
		BallastMiB:       c.BallastMiB,
		MaxBody:          c.MaxBody,
		MaxWait:          c.MaxWait,
		Retain:           c.Retain,
		RetainBodies:     c.RetainBodies,
		MaxReserveTopics: c.MaxReserveTopics,
		AdvertiseURL:     c.AdvertiseURL,
		ShutdownTimeout:  c.ShutdownTimeout,
		AlarmInterval:    c.AlarmInterval,
		MetricsMaxTopics: c.MetricsMaxTopics,
		WebhookAllowNets: c.WebhookAllowNets,
		LogLevel:         c.LogLevel,
		LogFormat:        c.LogFormat,
		AccessLog:        c.AccessLog,
		Security:         c.securityFlags.config(),
		RedisSettings:    c.redisFlags.config(),
		PostgresSettings: c.postgresFlags.config(),
	}
}

// Run serves until the context ends (SIGINT or SIGTERM), then shuts down
// gracefully. Logs go to stderr.
func (c *serveCmd) Run(e *env, kctx *kong.Context) error {
	cfg := c.config()
	if c.file != nil && c.file.warning != "" {
		cfg.NewLogger(e.stderr).Warn("config file: " + c.file.warning)
	}
	if c.Check {
		writeSettings(e.stdout, c.settings(kctx))
	}
	if err := cfg.Validate(); err != nil {
		return usageError{msg: "invalid configuration:\n" + c.annotate(kctx, err)}
	}
	if c.Check {
		return checkStart(e, cfg)
	}
	err := server.Run(e.ctx, cfg, cfg.NewLogger(e.stderr))
	if errors.Is(err, delayq.ErrCorrupt) {
		// Said first, before Pebble's detail, so an operator reading the
		// last line of a failed start sees what happened and what to do.
		return fmt.Errorf("refusing to start on a corrupt store (nothing was changed): %w", err)
	}
	return err
}

// fsyncFlag is --fsync: "always" (zero) or a window such as 50ms.
type fsyncFlag time.Duration

// UnmarshalText parses "always" or a duration (Go units plus d).
func (f *fsyncFlag) UnmarshalText(b []byte) error {
	if string(b) == "always" {
		*f = 0
		return nil
	}
	d, err := delayq.ParseDuration(string(b))
	if err != nil || d <= 0 {
		return fmt.Errorf("--fsync: %q is neither always nor a positive duration such as 50ms", b)
	}
	*f = fsyncFlag(d)
	return nil
}

// String shows the flag as it is written.
func (f fsyncFlag) String() string {
	if f == 0 {
		return "always"
	}
	return time.Duration(f).String()
}
