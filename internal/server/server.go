// Package server wires a delayq server together: config → store → engine →
// front ends, with their listeners, and takes it apart again in order on
// shutdown. It owns no queue semantics (package engine does) and parses no
// flags (package cli does).
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delayq/delayq/internal/alarm"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/beanstalk"
	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/dashboard"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/gcfloor"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/httpapi"
	"github.com/delayq/delayq/internal/limits"
	"github.com/delayq/delayq/internal/redact"
	"github.com/delayq/delayq/internal/schedule"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
	"github.com/delayq/delayq/internal/store/pgstore"
	"github.com/delayq/delayq/internal/store/redisstore"
)

// HTTP server timeouts. A reserve long-polls for up to MaxWait before it
// writes a byte, so the write timeout is MaxWait plus writeSlack; the read
// side is short because a request is read before any waiting starts. Once
// an answer is being written, each piece of it has --write-timeout
// instead (limits.Answers), so a client that stops reading is cut off
// then and one that reads a long answer steadily is not.
const (
	readHeaderTimeout = 10 * time.Second
	readTimeout       = time.Minute
	idleTimeout       = 2 * time.Minute
	writeSlack        = 30 * time.Second
	maxHeaderBytes    = 64 << 10
)

// Server is one running delayq instance. Create it with New, then Start;
// stop it with Shutdown. Run does all three for a process.
type Server struct {
	cfg config.Config
	log *slog.Logger

	st        store.Store
	eng       *engine.Engine
	httpLn    net.Listener
	http      *http.Server
	advertise string

	cluster     store.Cluster     // nil: the store serves this instance alone (the embedded store)
	beanstalkLn net.Listener      // nil when the beanstalkd protocol is off
	beanstalk   *beanstalk.Server // nil when the beanstalkd protocol is off
	debugLn     net.Listener      // nil unless cfg.DebugAddr is set
	debug       *http.Server      // nil unless cfg.DebugAddr is set
	sec         security          // auth, TLS and limits (security.go)
	sched       *schedule.Service // periodic jobs (schedules.go); nil if the store keeps none
	stopSched   func()            // stops sched.Run and waits for it
	hist        *history.History  // the dashboard charts' samples; runs with the engine
	sessions    *auth.Sessions    // the dashboard's logins (nil without tokens)
	alarms      *alarm.Service    // alarms (alarms.go); nil if the store keeps no documents
	stopAlarms  func()            // stops alarms.Run and waits for it

	group      *errgroup.Group
	failed     context.Context    // done when a part stopped on its own with an error
	stopEngine context.CancelFunc // ends engine.Run
	drained    chan struct{}      // closed once the engine drains (on http shutdown)

	shutdownOnce sync.Once
	shutdownErr  error
}

// New returns a server for cfg that logs to logger. It starts nothing.
func New(cfg config.Config, logger *slog.Logger) *Server {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, log: logger}
}

// Run starts a server and serves until ctx is done (the process got SIGINT
// or SIGTERM) or a part of it fails, then shuts it down within
// cfg.ShutdownTimeout. It returns the failure, if any, joined with any
// shutdown error (see Shutdown).
func Run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	// The process's GC pacing (see gcfloor): Run serves one server per
	// process, unlike New and Start, which tests call many times.
	defer gcfloor.Start(gcfloor.DefaultFloor).Stop()
	s := New(cfg, logger)
	if err := s.Start(ctx); err != nil {
		return err
	}
	stopping := s.notifySystemd() // READY=1, watchdog pings (notify.go)
	select {
	case <-ctx.Done():
		s.log.Info("shutdown requested", "cause", context.Cause(ctx))
	case <-s.failed.Done():
		s.log.Error("server part failed; shutting down", "err", context.Cause(s.failed))
	}
	stopping() // STOPPING=1
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}

// Start validates the configuration, opens the store, binds the listeners
// and starts serving. On error everything it opened is closed again. ctx
// bounds only the start itself.
func (s *Server) Start(ctx context.Context) error {
	if err := s.cfg.Validate(); err != nil {
		return fmt.Errorf("server: invalid configuration:\n%w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := s.setupSecurity(); err != nil {
		return err
	}
	st, err := s.openStore(ctx)
	if err != nil {
		return err
	}
	s.st = st
	s.cluster, _ = st.(store.Cluster)
	s.hist = history.New(history.Config{Topics: st.Topics, Store: st, Counts: s.jobCounts, Logger: s.log.With("component", "history")})
	s.eng = engine.New(st, engine.Config{
		MaxBody:          s.cfg.MaxBody,
		MaxWait:          s.cfg.MaxWait,
		MaxReserveTopics: s.cfg.MaxReserveTopics,
		MaxWaiting:       s.cfg.MaxWaitingReserves,
		MaxTopics:        s.cfg.MaxTopics,
		Logger:           s.log.With("component", "engine"),
		Fired:            s.hist.Fired,
		PreciseTimer:     true,
	})
	s.eng.Metrics().LimitTopicLabels(s.cfg.MetricsMaxTopics)
	s.sched = s.newSchedules()
	s.alarms = s.newAlarms()
	// Binding first makes Addr known as soon as Start returns (port 0
	// picks a free port); the advertised URL needs the bound address.
	if err := s.bind(); err != nil {
		return errors.Join(err, s.closeStore())
	}
	s.build()
	s.serve()
	// The bound addresses, not the configured ones: with port 0 the log
	// is where an operator (or a script) learns the port picked.
	s.log.Info("delayq serving", "http", s.httpLn.Addr().String(), "beanstalk", addrOf(s.BeanstalkAddr()), "advertise_url", s.advertise,
		"debug", addrOf(s.DebugAddr()), s.storeAttr(), "max_wait", s.cfg.MaxWait, "max_body", s.cfg.MaxBody)
	return nil
}

// storeAttr names the store the server uses, for its start log: the
// Redis or Postgres it serves from (no password), or the data directory
// (which the shared stores ignore, so it must not be named then).
func (s *Server) storeAttr() slog.Attr {
	switch {
	case s.cfg.Redis != "":
		return slog.Group("store", "kind", "redis", "redis", redact.String(s.cfg.Redis), "prefix", s.cfg.RedisPrefix)
	case s.cfg.Postgres != "":
		return slog.Group("store", "kind", "postgres", "postgres", redact.String(s.cfg.Postgres), "schema", s.cfg.PostgresSchema)
	}
	return slog.Group("store", "kind", "disk", "data_dir", s.cfg.DataDir)
}

// openInterruptible runs open (a store's open, which may take long: a
// large WAL to replay, a slow disk) and gives up when ctx ends, so SIGTERM
// during startup ends the process instead of waiting for it. The open
// carries on in the background and whatever it returns is closed: nothing
// was acknowledged yet, and the store is made to survive kill -9 at any
// point, which is what stopping mid-open amounts to.
func openInterruptible[T interface{ Close() error }](ctx context.Context, log *slog.Logger, open func() (T, error)) (T, error) {
	type result struct {
		st  T
		err error
	}
	done := make(chan result, 1)
	go func() {
		st, err := open()
		done <- result{st, err}
	}()
	select {
	case r := <-done:
		return r.st, r.err
	case <-ctx.Done():
		log.Warn("startup interrupted while the store was opening", "cause", context.Cause(ctx))
		go func() {
			if r := <-done; r.err == nil {
				_ = r.st.Close()
			}
		}()
		var zero T
		return zero, fmt.Errorf("server: interrupted while opening the store: %w", context.Cause(ctx))
	}
}

// retention is how long the store keeps the jobs that end (--retain,
// --retain-bodies).
func (s *Server) retention() store.Retention {
	return store.Retention{For: s.cfg.Retain, Bodies: s.cfg.RetainBodies}
}

// openStore opens the backend the configuration names: Postgres when
// cfg.Postgres is set, Redis when cfg.Redis is set (DataDir is then
// ignored), else the embedded store.
func (s *Server) openStore(ctx context.Context) (store.Store, error) {
	start := time.Now()
	if s.cfg.Postgres != "" {
		st, err := pgstore.Open(ctx, pgstore.Options{URL: s.cfg.Postgres, Schema: s.cfg.PostgresSchema,
			StatementTimeout: s.cfg.PostgresStatementTimeout, ConnectTimeout: s.cfg.PostgresConnectTimeout,
			MaxBody: s.cfg.MaxBody, Retention: s.retention(), Logger: s.log.With("component", "pgstore")})
		if err != nil {
			return nil, fmt.Errorf("server: open postgres store: %w", err)
		}
		s.log.Info("store opened", "store", "postgres", "schema", st.Schema(), "statement_timeout", s.cfg.PostgresStatementTimeout,
			"took", time.Since(start).Round(time.Microsecond))
		return st, nil
	}
	if s.cfg.Redis != "" {
		st, err := redisstore.New(ctx, redisstore.Options{URL: s.cfg.Redis, Logger: s.log.With("component", "redisstore"),
			Prefix: s.cfg.RedisPrefix, Buckets: s.cfg.RedisBuckets, Volatile: s.cfg.RedisVolatile,
			WaitReplicas: s.cfg.RedisWaitReplicas, WaitTimeout: s.cfg.RedisWaitTimeout, Retention: s.retention()})
		if err != nil {
			return nil, fmt.Errorf("server: open redis store: %w", redact.Error(err)) // it may quote the URL
		}
		s.log.Info("store opened", "store", "redis", "took", time.Since(start).Round(time.Microsecond))
		return st, nil
	}
	st, err := openInterruptible(ctx, s.log, func() (*diskstore.Store, error) {
		return diskstore.Open(s.cfg.DataDir, s.diskOptions())
	})
	if err != nil {
		return nil, fmt.Errorf("server: open store in %s: %w", s.cfg.DataDir, err)
	}
	s.log.Info("store opened", "store", "disk", "data_dir", s.cfg.DataDir, "fsync", fsyncName(s.cfg.Fsync), "cache_mib", s.cfg.CacheMiB, "hot_mib", s.cfg.HotMiB, "took", time.Since(start).Round(time.Microsecond))
	return st, nil
}

// diskOptions are the embedded store's options. The store does not lend
// its flushes and compactions a P (diskstore.Options.BackgroundP): that
// changed GOMAXPROCS, stopping the world, at every flush and compaction;
// set GOMAXPROCS yourself to give background work room
// (docs/operations.md, "CPU").
func (s *Server) diskOptions() diskstore.Options {
	return diskstore.Options{
		Logger:    s.log.With("component", "diskstore"),
		CacheSize: int64(s.cfg.CacheMiB) << 20,
		HotSize:   hotBytes(s.cfg.HotMiB),
		MinFree:   minFreeBytes(s.cfg.MinFreeMiB),
		SyncEvery: s.cfg.Fsync,
		Ballast:   int64(s.cfg.BallastMiB) << 20,
		Retention: s.retention(),
	}
}

// bind takes every port the configuration names, and only that: a later
// bind that fails frees the ports already taken, so a failed Start leaves
// nothing behind. Building is left to build, which cannot fail.
func (s *Server) bind() (err error) {
	var bound []net.Listener
	defer func() {
		if err != nil { // a later bind failed: free the ports already taken
			for _, l := range bound {
				l.Close()
			}
		}
	}()
	bind := func(name, addr string) (net.Listener, error) {
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return nil, fmt.Errorf("server: listen %s: %w", name, err)
		}
		bound = append(bound, l)
		return l, nil
	}
	if s.httpLn, err = bind("http", s.cfg.HTTPAddr); err != nil {
		return err
	}
	s.httpLn = s.secureHTTP(s.httpLn)
	if s.cfg.BeanstalkAddr != "" {
		if s.beanstalkLn, err = bind("beanstalk", s.cfg.BeanstalkAddr); err != nil {
			return err
		}
		s.beanstalkLn = s.secureBeanstalk(s.beanstalkLn)
	}
	if s.cfg.DebugAddr != "" {
		if s.debugLn, err = bind("debug", s.cfg.DebugAddr); err != nil {
			return err
		}
	}
	return nil
}

// build makes the front ends for the bound listeners: the beanstalkd
// server, the profiler, and the HTTP API with the address it advertises
// (known only once the HTTP port is bound), which on Redis is also
// announced to the other instances.
func (s *Server) build() {
	if s.beanstalkLn != nil {
		s.beanstalk = &beanstalk.Server{Engine: s.eng, Logger: s.log.With("component", "beanstalk")}
		s.guardBeanstalk(s.beanstalk)
	}
	if s.debugLn != nil {
		s.debug = &http.Server{Handler: debugHandler(), ReadHeaderTimeout: readHeaderTimeout}
	}
	s.advertise = s.advertiseScheme(s.cfg.AdvertiseURLFor(s.httpLn.Addr()))
	s.sessions = auth.NewSessions(s.sec.auth)
	s.sessions.SetMaxPerToken(s.cfg.MaxDashboardSessions)
	opts := httpapi.Options{
		Sessions:     s.sessions,
		Rates:        s.sec.rates,
		Failures:     s.sec.fails,
		Logger:       s.log.With("component", "http"),
		AdvertiseURL: s.advertise,
		UI:           dashboard.Handler(),
		Schedules:    s.sched,
		History:      s.hist,
		Alarms:       s.alarms,
	}
	if s.cluster != nil {
		protocols := []string{"http"}
		if s.beanstalk != nil {
			protocols = append(protocols, "beanstalk")
		}
		s.cluster.Advertise(s.advertise, protocols)
		opts.Cluster = s.cluster.Instances
	}
	s.http = s.httpServer(httpapi.NewHandler(s.eng, opts))
}

// httpServer wraps the API handler in the HTTP server's protections and
// timeouts, and drains the engine when it shuts down.
func (s *Server) httpServer(api http.Handler) *http.Server {
	srv := &http.Server{
		// A hostile web page must not make an operator's browser put, kick
		// or delete jobs: refuse cross-origin unsafe requests (browsers say
		// where they come from; curl and SDK clients send no such headers).
		//
		// In front of it all, what every request costs while it runs:
		// its connection busy, its bytes and its answer's on the budget,
		// and the answer's writes timed (limits.Answers).
		Handler: limits.Answers(s.withGRPC(httpapi.Observe(s.eng, s.guardHTTP(http.NewCrossOriginProtection().Handler(api)),
			httpapi.ObserveOptions{Logger: s.log.With("component", "http"), AccessLog: s.cfg.AccessLog})),
			limits.AnswerOptions{Bytes: s.sec.bytes, WriteTimeout: s.cfg.WriteTimeout}),
		// Each request learns its connection, to mark it busy and count
		// it against its token's share.
		ConnContext:       limits.WithConn,
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      s.cfg.MaxWait + writeSlack,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.With("component", "http").Handler(), slog.LevelWarn),
	}
	srv.Protocols = httpProtocols()
	// http.Server.Shutdown closes the listeners first, then calls this and
	// waits for in-flight requests: draining the engine now makes every
	// long-poll return, so the wait is short.
	s.drained = make(chan struct{})
	srv.RegisterOnShutdown(func() {
		s.eng.Drain()
		close(s.drained)
	})
	return srv
}

// serve starts the engine loop and the front ends, each owned by the
// errgroup. The first to fail cancels s.failed, which Run watches.
func (s *Server) serve() {
	g, gctx := errgroup.WithContext(context.Background())
	engCtx, stop := context.WithCancel(context.Background())
	s.group, s.failed, s.stopEngine = g, gctx, stop
	g.Go(func() error {
		if err := s.eng.Run(engCtx); err != nil {
			return fmt.Errorf("engine: %w", err)
		}
		return nil
	})
	s.reloadOnSIGHUP(g, engCtx)
	g.Go(func() error { return s.hist.Run(engCtx) })
	g.Go(func() error { return s.runForget(engCtx) })
	s.runSchedules(g)
	s.runAlarms(g)
	g.Go(func() error {
		if err := s.http.Serve(s.httpLn); !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("http: %w", err)
		}
		return nil
	})
	if s.debug != nil {
		g.Go(func() error {
			if err := s.debug.Serve(s.debugLn); !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("debug: %w", err)
			}
			return nil
		})
	}
	if s.beanstalk != nil {
		g.Go(func() error {
			if err := s.beanstalk.Serve(s.beanstalkLn); !errors.Is(err, beanstalk.ErrServerClosed) {
				return fmt.Errorf("beanstalk: %w", err)
			}
			return nil
		})
	}
}

// BeanstalkAddr is the address the beanstalkd protocol listens on, or nil
// when it is off. Valid after Start.
func (s *Server) BeanstalkAddr() net.Addr {
	if s.beanstalkLn == nil {
		return nil
	}
	return s.beanstalkLn.Addr()
}

// DebugAddr is the address of the profiler listener, or nil when it is
// off. Valid after Start.
func (s *Server) DebugAddr() net.Addr {
	if s.debugLn == nil {
		return nil
	}
	return s.debugLn.Addr()
}

// addrOf is a listener's address as the start log shows it: "" for
// one that is off.
func addrOf(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

// Addr is the address the HTTP API listens on. Valid after Start.
func (s *Server) Addr() net.Addr { return s.httpLn.Addr() }

// URL is the base URL of the HTTP API, as advertised to clients.
func (s *Server) URL() string { return s.advertise }

// Engine is the server's engine, for tests and embedding.
func (s *Server) Engine() *engine.Engine { return s.eng }

// Shutdown stops the server in order, logging each step: stop accepting
// connections, drain the engine so long-polls return, wait for in-flight
// requests (until ctx is done, then cut them off), stop the engine loop,
// close the store. It returns the error of any part that had failed on its
// own, joined with the shutdown's own errors. Calls after the first return
// the first's result; a server never started has nothing to stop.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.group == nil {
		return nil
	}
	s.shutdownOnce.Do(func() { s.shutdownErr = s.shutdown(ctx) })
	return s.shutdownErr
}

func (s *Server) shutdown(ctx context.Context) error {
	start := time.Now()
	s.stopSched()
	s.stopAlarms()
	s.log.Info("shutdown: closing listeners and draining the engine")
	httpDone := make(chan error, 1)
	go func() { httpDone <- s.http.Shutdown(ctx) }()
	var errs []error
	if s.debug != nil {
		// A profile in progress is cut off: it is no reason to wait.
		_ = s.debug.Close()
	}
	// Closing beanstalkd connections releases their reserved jobs through
	// the engine, so this must finish before the engine loop and the store
	// stop.
	if s.beanstalk != nil {
		if err := s.beanstalk.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: beanstalk shutdown: %w", err))
		}
		s.log.Info("shutdown: beanstalkd connections closed")
	}
	select {
	case <-s.drained:
		s.log.Info("shutdown: engine draining; long-polls returning")
	case <-ctx.Done():
	}
	if err := <-httpDone; err != nil {
		s.log.Warn("shutdown: in-flight requests cut off", "err", err)
		errs = append(errs, fmt.Errorf("server: http shutdown: %w", err), s.http.Close())
	} else {
		s.log.Info("shutdown: in-flight requests finished")
	}
	s.eng.Drain() // in case the timeout came before the hook ran
	s.stopEngine()
	if err := s.group.Wait(); err != nil {
		errs = append(errs, err) // a part that failed on its own
	}
	s.log.Info("shutdown: engine stopped")
	errs = append(errs, s.closeStore())
	s.log.Info("shutdown complete", "took", time.Since(start).Round(time.Millisecond))
	return errors.Join(errs...)
}

func (s *Server) closeStore() error {
	if err := s.st.Close(); err != nil {
		s.log.Error("shutdown: closing the store failed", "err", err)
		return fmt.Errorf("server: close store: %w", err)
	}
	s.log.Info("shutdown: store closed")
	return nil
}

// hotBytes is diskstore's HotSize for --hot-mib: 0 MiB keeps no records
// (diskstore reads 0 as its default, a negative size as none).
func hotBytes(mib int) int {
	if mib == 0 {
		return -1
	}
	return mib << 20
}

// minFreeBytes is diskstore's MinFree for --min-free-mib: 0 MiB turns the
// check off (diskstore reads 0 as its default, a negative value as off).
func minFreeBytes(mib int) int64 {
	if mib == 0 {
		return -1
	}
	return int64(mib) << 20
}

// fsyncName names the fsync mode as --fsync spells it.
func fsyncName(d time.Duration) string {
	if d == 0 {
		return "always"
	}
	return d.String()
}
