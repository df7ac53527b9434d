package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var (
	_ store.Store       = (*Store)(nil)
	_ store.Notifier    = (*Store)(nil)
	_ store.Cluster     = (*Store)(nil)
	_ store.TopicStater = (*Store)(nil)
)

// Options configure Open. Zero values take the documented defaults.
type Options struct {
	// URL is the PostgreSQL connection string (postgres://user:pass@host:port/db?...
	// or key=value form). Several hosts with target_session_attrs=read-write
	// follow a failover to the new primary. Required.
	URL string
	// Schema holds delayq's tables and functions. Default "delayq".
	// Letters, digits and '_' only, not starting with a digit.
	Schema string
	// Retention keeps deleted jobs readable, and their ids taken, for
	// Retention.For (store.Retention).
	Retention store.Retention
	// MaxBody is the largest body the SQL put function accepts (the
	// server's --max-body); Open publishes it in the schema's settings.
	// 0 leaves the setting as it is.
	MaxBody int
	// StatementTimeout cuts off any statement of the store that runs
	// longer (Postgres statement_timeout); the call fails with
	// ErrUnavailable naming the timeout. Default 5s.
	StatementTimeout time.Duration
	// MaxConns bounds the connection pool. Default 16.
	MaxConns int
	// LeaseCheck is how often an instance that does not hold the timer
	// lease tries to take it, and how often the holder checks its lease
	// connection; an instance that dies loses the lease when Postgres
	// sees its session end (TCP keepalives of a few seconds). Default 1s.
	LeaseCheck time.Duration
	// ConnectTimeout bounds how long Open retries, with backoff, a
	// database that does not answer. Default 0: one attempt.
	ConnectTimeout time.Duration
	// InstanceID names this instance in GET /v1/cluster. Default random.
	InstanceID string
	// AdvertiseURL and Protocols are listed in GET /v1/cluster.
	AdvertiseURL string
	Protocols    []string
	// Logger receives warnings and lease changes. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Schema == "" {
		o.Schema = "delayq"
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = 5 * time.Second
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 16
	}
	if o.LeaseCheck <= 0 {
		o.LeaseCheck = time.Second
	}
	if o.InstanceID == "" {
		o.InstanceID = nonce()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// CheckSchema refuses a schema name that is not a plain identifier, so
// it can be written into SQL and NOTIFY channel names as it is.
func CheckSchema(s string) error {
	if s == "" || len(s) > 40 {
		return fmt.Errorf("schema %q: 1 to 40 characters", s)
	}
	for i, c := range s {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return fmt.Errorf("schema %q: letters, digits and '_' only, not starting with a digit", s)
		}
	}
	return nil
}

// Store is the PostgreSQL backend. Its methods are safe for concurrent use.
type Store struct {
	opt    Options
	pool   *pgxpool.Pool
	cfg    *pgxpool.Config
	q      queries // SQL with the schema written in
	log    *slog.Logger
	since  time.Time
	ctx    context.Context // lives until Close; owns the background loops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	clockMu sync.Mutex
	clock   store.Clock // guarded by clockMu

	pidMu sync.Mutex
	pids  map[uint32]bool // backend pids of this store's pool; guarded by pidMu

	lease *lease
	fan   *store.Fanout
	// publishWait is publishWait, but tests that must not race its
	// timeout set it longer.
	publishWait time.Duration
	bell        *bell   // this instance's changes, for the others
	promise     promise // the timer's promise to the SQL puts

	peersMu sync.Mutex
	peers   map[string]bool // the other instances alive at the last heartbeat; guarded by peersMu
	alone   atomic.Bool     // no other instance alive: the bell stays quiet
	reach   reach           // how the last heartbeat went (Health)

	line putLine // puts waiting for a group (group.go)

	store.CommitHook // times each write transaction (delayq_store_commit_seconds)

	adMu      sync.Mutex
	advertise string   // guarded by adMu
	protocols []string // guarded by adMu
}

// Open connects to PostgreSQL, applies the schema's migrations (under an
// advisory lock, so instances starting together apply them once), and
// starts the timer lease, LISTEN and heartbeat loops, which run until
// Close.
func Open(ctx context.Context, opt Options) (*Store, error) {
	opt.setDefaults()
	s, err := prepare(opt)
	if err != nil {
		return nil, err
	}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	if err := s.checkSession(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if _, err := s.migrate(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if err := s.checkPrivileges(ctx); err != nil {
		s.pool.Close()
		return nil, err
	}
	if opt.MaxBody > 0 {
		if _, err := s.pool.Exec(ctx, s.q.setMaxBody, strconv.Itoa(opt.MaxBody)); err != nil {
			s.pool.Close()
			return nil, s.fail("publish max_body", err)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.fan = store.NewFanout(1024)
	s.publishWait = publishWait
	s.bell = newBell()
	s.lease = &lease{s: s}
	s.lease.try(ctx)
	if err := s.heartbeat(ctx); err != nil {
		s.cancel()
		s.lease.release()
		s.pool.Close()
		return nil, err
	}
	s.wg.Add(4)
	go func() { defer s.wg.Done(); s.chime(s.ctx) }()
	go func() { defer s.wg.Done(); s.lease.run(s.ctx) }()
	go func() { defer s.wg.Done(); s.listen(s.ctx) }()
	go func() { defer s.wg.Done(); s.heartbeats(s.ctx) }()
	return s, nil
}

// prepare checks opt and builds the store's connection settings.
func prepare(opt Options) (*Store, error) {
	if err := CheckSchema(opt.Schema); err != nil {
		return nil, fmt.Errorf("pgstore: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(opt.URL)
	if err != nil {
		return nil, fmt.Errorf("pgstore: bad postgres url %s: %w", Redact(opt.URL), errors.Unwrap(err))
	}
	cfg.MaxConns = int32(opt.MaxConns)
	cfg.ConnConfig.RuntimeParams["statement_timeout"] = strconv.FormatInt(opt.StatementTimeout.Milliseconds(), 10)
	if _, set := cfg.ConnConfig.RuntimeParams["plan_cache_mode"]; !set {
		// Every statement the store sends is prepared once per connection
		// and has one good plan, through the index that matches it
		// (plan_test.go checks reserve's). Left to choose, Postgres
		// planned the reserve, the tick's reads and the finish's read
		// afresh at every call, because their generic plan's estimate
		// (arrays and LIMIT parameters) looked dearer than the custom
		// one: planning then cost Postgres more CPU than running them
		// (pg_stat_statements: 1.3 s of plan time against 1.8 s of
		// execution for 5,000 jobs fired and finished).
		cfg.ConnConfig.RuntimeParams["plan_cache_mode"] = "force_generic_plan"
	}
	if _, set := cfg.ConnConfig.RuntimeParams["application_name"]; !set {
		// Names the instance in pg_stat_activity, for the DBA.
		cfg.ConnConfig.RuntimeParams["application_name"] = "delayq/" + opt.InstanceID
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = 3 * time.Second
	}
	// Short TCP keepalives: a dead instance's lease connection ends, and
	// its lease moves, within seconds rather than the kernel's two hours.
	d := &net.Dialer{KeepAliveConfig: net.KeepAliveConfig{Enable: true, Idle: 3 * time.Second, Interval: time.Second, Count: 3}}
	cfg.ConnConfig.DialFunc = d.DialContext
	s := &Store{opt: opt, cfg: cfg, q: newQueries(opt.Schema), log: opt.Logger, since: time.Now(),
		pids: map[uint32]bool{}, advertise: opt.AdvertiseURL, protocols: opt.Protocols}
	cfg.AfterConnect = func(_ context.Context, c *pgx.Conn) error {
		s.pidMu.Lock()
		s.pids[c.PgConn().PID()] = true
		s.pidMu.Unlock()
		return nil
	}
	cfg.BeforeClose = func(c *pgx.Conn) {
		s.pidMu.Lock()
		delete(s.pids, c.PgConn().PID())
		s.pidMu.Unlock()
	}
	return s, nil
}

// connect opens the pool and checks the database answers, retrying with
// backoff for up to Options.ConnectTimeout.
func (s *Store) connect(ctx context.Context) error {
	pool, err := pgxpool.NewWithConfig(ctx, s.cfg)
	if err != nil {
		return fmt.Errorf("pgstore: %w", err)
	}
	deadline := time.Now().Add(s.opt.ConnectTimeout)
	wait := 100 * time.Millisecond
	for {
		err = pool.Ping(ctx)
		if err == nil {
			s.pool = pool
			return nil
		}
		if ctx.Err() != nil || !time.Now().Add(wait).Before(deadline) || !retryable(err) {
			pool.Close()
			return fmt.Errorf("pgstore: connect to postgres at %s: %w: %s", s.hosts(), delayq.ErrUnavailable, describeErr(err))
		}
		s.log.Warn("postgres does not answer; retrying", "host", s.hosts(), "err", describeErr(err), "retry_in", wait)
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// retryable says whether a connect error may go away by itself (the
// server is down or starting), unlike a refused password or a database
// that does not exist.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "57P03" // cannot_connect_now: starting up
	}
	return true
}

// hosts names the database's hosts for messages, never the password.
func (s *Store) hosts() string {
	cc := s.cfg.ConnConfig
	hs := []string{net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))}
	for _, f := range cc.Fallbacks {
		hs = append(hs, net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))))
	}
	return strings.Join(hs, ",") + "/" + cc.Database
}

// Redact returns a connection string with its password replaced by
// "xxxxx", for logs and errors.
func Redact(connString string) string {
	if u, err := url.Parse(connString); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		if _, has := u.User.Password(); has {
			u.User = url.UserPassword(u.User.Username(), "xxxxx")
		}
		q := u.Query()
		if q.Has("password") {
			q.Set("password", "xxxxx")
			u.RawQuery = q.Encode()
		}
		return u.Redacted()
	}
	// key=value form: drop the value of password=...
	f := strings.Fields(connString)
	for i, kv := range f {
		if strings.HasPrefix(kv, "password=") {
			f[i] = "password=xxxxx"
		}
	}
	return strings.Join(f, " ")
}

// describeErr says what a connection error is without the connection
// string pgx may quote in it.
func describeErr(err error) string {
	var ce *pgconn.ConnectError
	if errors.As(err, &ce) {
		if u := errors.Unwrap(ce); u != nil {
			return u.Error()
		}
	}
	return err.Error()
}

// checkSession refuses a connection whose statements do not all run in
// one server session: a pooler in transaction or statement mode
// (PgBouncer's pool_mode = transaction) hands each statement to
// whichever server connection is free, which breaks LISTEN (no
// wake-ups) and the session advisory lock of the timer lease. It asks
// the backend's pid a few times on one connection; a pooler that keeps
// handing back the same server connection while idle is not caught
// (docs/postgres.md says to use session mode or a direct connection).
func (s *Store) checkSession(ctx context.Context) error {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.fail("connect", err)
	}
	defer conn.Release()
	var first int32
	for i := range 3 {
		var pid int32
		if err := conn.QueryRow(ctx, "SELECT pg_backend_pid()").Scan(&pid); err != nil {
			return s.fail("connect", err)
		}
		if i == 0 {
			first = pid
		} else if pid != first {
			return fmt.Errorf("pgstore: %s: one connection's statements ran in different server sessions (pids %d and %d): a pooler in transaction or statement mode is in front of postgres; delayq needs session mode or a direct connection for LISTEN and its advisory locks (see docs/postgres.md)", s.hosts(), first, pid)
		}
	}
	return nil
}

// checkPrivileges names the privilege a role lacks, at start, rather
// than failing on the first put.
func (s *Store) checkPrivileges(ctx context.Context) error {
	var missing []string
	rows, err := s.pool.Query(ctx, s.q.privileges)
	if err != nil {
		return s.fail("check privileges", err)
	}
	for rows.Next() {
		var what string
		if err := rows.Scan(&what); err != nil {
			rows.Close()
			return s.fail("check privileges", err)
		}
		missing = append(missing, what)
	}
	if err := rows.Err(); err != nil {
		return s.fail("check privileges", err)
	}
	if len(missing) > 0 {
		return fmt.Errorf("pgstore: the role lacks privileges delayq needs: %s (grant them, see docs/postgres.md)", strings.Join(missing, ", "))
	}
	return nil
}

// Advertise sets the URL and protocols this instance lists in GET
// /v1/cluster; it takes effect at the next heartbeat.
func (s *Store) Advertise(url string, protocols []string) {
	s.adMu.Lock()
	defer s.adMu.Unlock()
	s.advertise, s.protocols = url, append([]string(nil), protocols...)
}

func (s *Store) advertised() (string, []string) {
	s.adMu.Lock()
	defer s.adMu.Unlock()
	return s.advertise, s.protocols
}

// Close stops the loops, hands the timer lease back at once and closes
// the connections.
func (s *Store) Close() error {
	if s.ctx.Err() != nil {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	s.lease.release()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_, _ = s.pool.Exec(ctx, s.q.leaveInstance, s.opt.InstanceID)
	s.fan.Close()
	s.pool.Close()
	return nil
}

var errClosed = fmt.Errorf("pgstore: closed: %w", delayq.ErrUnavailable)

func (s *Store) check() error {
	if s.ctx.Err() != nil {
		return errClosed
	}
	return nil
}

// fail wraps a database or connection error: callers see
// delayq.ErrUnavailable (HTTP 503) with the cause named. A statement
// cut off by statement_timeout says so, and a missing privilege names
// itself.
func (s *Store) fail(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("pgstore: %s: %w", op, err)
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "57014":
			return fmt.Errorf("pgstore: %s: %w: statement cut off by statement_timeout (%v): %s", op, delayq.ErrUnavailable, s.opt.StatementTimeout, pe.Message)
		case "42501":
			return fmt.Errorf("pgstore: %s: %w: the role lacks a privilege: %s", op, delayq.ErrUnavailable, pe.Message)
		}
	}
	return fmt.Errorf("pgstore: %s: %w: postgres: %s", op, delayq.ErrUnavailable, describeErr(err))
}

// tx runs fn in a transaction and commits it. An error fn returns that
// wraps a delayq sentinel (a failed check) rolls back and is returned
// as it is; a database error becomes ErrUnavailable.
func (s *Store) tx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	if err := s.check(); err != nil {
		return err
	}
	start := time.Now()
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return s.fail(op, err)
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback(context.WithoutCancel(ctx))
		if isSentinel(err) {
			return err
		}
		return s.fail(op, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return s.fail(op, err)
	}
	s.CommitHook.Committed(start)
	return nil
}

// isSentinel says whether err is one of the contract's answers rather
// than a failure of the database.
func isSentinel(err error) bool {
	for _, e := range []error{delayq.ErrNotFound, delayq.ErrExists, delayq.ErrNotReserved, delayq.ErrState, store.ErrDocConflict, store.ErrDocNotFound, delayq.ErrInvalid} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// at is the time to act at for a caller's now ("Now never goes back").
func (s *Store) at(now time.Time) time.Time {
	s.clockMu.Lock()
	defer s.clockMu.Unlock()
	return s.clock.At(now)
}

// ownPID says whether a notification came from this store's own pool.
func (s *Store) ownPID(pid uint32) bool {
	s.pidMu.Lock()
	defer s.pidMu.Unlock()
	return s.pids[pid]
}

// nonce returns 16 random hex digits.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// InstanceID returns the id this instance uses in GET /v1/cluster.
func (s *Store) InstanceID() string { return s.opt.InstanceID }

// Schema returns the schema the store's tables live in.
func (s *Store) Schema() string { return s.opt.Schema }
