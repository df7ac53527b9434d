package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var (
	_ store.Store    = (*Store)(nil)
	_ store.Notifier = (*Store)(nil)
)

// Options configure New. Zero values take the documented defaults.
type Options struct {
	// URL is the Redis address: redis://[user:pass@]host:port/db,
	// rediss:// for TLS, redis://host:port?addr=host2:port2 to name several
	// Cluster seeds, or ...?master_set=name for Sentinel (the hosts are then
	// the sentinels). Either URL or Addrs is required.
	URL string
	// Addrs are host:port seeds, used when URL is empty (Cluster nodes, or
	// one standalone server).
	Addrs []string
	// Prefix starts every key. Default "delayq". Several deployments (or
	// tests) can share one Redis under different prefixes. Letters,
	// digits, '_', '-' and '.' only (CheckPrefix): no ':' so no prefix is
	// the start of another deployment's key, no '{' or '}' so every key
	// keeps its Cluster hash tag.
	Prefix string
	// Buckets is how many parts the timer work is split into; every
	// instance of a deployment must use the same number (New refuses to
	// join a deployment that uses another: see meta.go). Default 16, at
	// most MaxBuckets.
	Buckets int
	// Volatile lets New start on a Redis that persists nothing (no AOF and
	// no RDB save points), where a Redis restart loses every job. Without
	// it New refuses such a Redis, and one whose persistence it cannot
	// read (CONFIG disabled or renamed).
	Volatile bool
	// WaitReplicas, when above 0, acknowledges a write only after Redis
	// WAIT confirms that this many replicas have it, so a failover to one
	// of them loses no acknowledged job (wait.go).
	WaitReplicas int
	// WaitTimeout bounds that WAIT; a write not confirmed in time fails
	// with a *delayq.ReplicationError (HTTP 503) that says it is on the
	// primary and how many replicas confirmed it. Default 1s.
	WaitTimeout time.Duration
	// LeaseTTL is how long a bucket lease lives without renewal; leases are
	// renewed every LeaseTTL/3, so a dead instance's buckets move to live
	// ones within about LeaseTTL*4/3. Default 1.5s (moves within 2 s).
	LeaseTTL time.Duration
	// InstanceID names this instance in leases and GET /v1/cluster.
	// Default: a random id.
	InstanceID string
	// AdvertiseURL is this instance's HTTP base URL as clients should
	// reach it (GET /v1/cluster).
	AdvertiseURL string
	// Protocols this instance serves, listed in GET /v1/cluster ("http",
	// "beanstalk").
	Protocols []string
	// Retention keeps deleted jobs readable, and their ids taken, for
	// Retention.For (store.Retention): Redis expires each retained record
	// by its own TTL, and reads hide one whose retention ended by
	// Retention.Clock. Every instance of a deployment should use the same.
	Retention store.Retention
	// Logger receives warnings about the Redis configuration and lease
	// changes. Default slog.Default().
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Prefix == "" {
		o.Prefix = "delayq"
	}
	if o.Buckets <= 0 {
		o.Buckets = 16
	}
	if o.WaitTimeout <= 0 {
		o.WaitTimeout = time.Second
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = 1500 * time.Millisecond
	}
	if o.InstanceID == "" {
		o.InstanceID = nonce()
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Store is the Redis backend. Its methods are safe for concurrent use.
type Store struct {
	opt    Options
	c      rueidis.Client
	k      keys
	log    *slog.Logger
	since  time.Time
	ctx    context.Context // lives until Close; owns the background loops
	cancel context.CancelFunc
	wg     sync.WaitGroup

	leases *leases
	fan    *fanout

	// oneNode: every key is on one server (not a Cluster), so transitions
	// take their global keys in their own script (onenode.go).
	oneNode bool
	// sharded: a Cluster of Redis 7 or later, whose events go over
	// sharded pub/sub (notify.go); channels are the event channels.
	sharded    bool
	channels   []string
	topicOf    seqTopics
	registered registeredTopics
	seqs       seqBlocks
	slots      slotMap                // which master serves each slot (slots.go)
	puts       putLine                // puts waiting for a group (putgroup.go; on a Cluster one line per topic)
	finishes   onceLine[*finishCall]  // Delete calls written in groups (finish.go)
	reserves   onceLine[*reserveCall] // single-topic Reserve calls likewise (reservegroup.go)

	// testHookIndexed, set only by tests, runs in a multi-step put
	// between its bucket marks and its inserts (put.go, cluster.go).
	testHookIndexed func()

	store.CommitHook // times each write round trip (delayq_store_commit_seconds)

	adMu      sync.Mutex
	advertise string   // guarded by adMu
	protocols []string // guarded by adMu
}

// Advertise sets the URL and protocols this instance lists in GET
// /v1/cluster, for servers that learn their address only after the store
// is open (listen on port 0). It takes effect at the next heartbeat.
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

// New connects to Redis, checks that it is usable, takes this instance's
// share of the timer buckets and starts the lease and event loops, which
// run until Close.
func New(ctx context.Context, opt Options) (*Store, error) {
	opt.setDefaults()
	if err := CheckPrefix(opt.Prefix); err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	if opt.Buckets > MaxBuckets {
		return nil, fmt.Errorf("redisstore: %d buckets is more than %d", opt.Buckets, MaxBuckets)
	}
	if opt.WaitReplicas < 0 {
		return nil, fmt.Errorf("redisstore: wait replicas %d is negative", opt.WaitReplicas)
	}
	copt, err := clientOptions(opt)
	if err != nil {
		return nil, fmt.Errorf("redisstore: %w", err)
	}
	c, err := rueidis.NewClient(copt)
	if err != nil {
		return nil, fmt.Errorf("redisstore: connect %s: %w: %w", describe(opt), delayq.ErrUnavailable, err)
	}
	s := &Store{opt: opt, c: c, k: keys{prefix: opt.Prefix}, log: opt.Logger, since: time.Now(),
		advertise: opt.AdvertiseURL, protocols: opt.Protocols, oneNode: c.Mode() != rueidis.ClientModeCluster}
	if err := s.checkServer(ctx); err != nil {
		c.Close()
		return nil, err
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	if !s.oneNode {
		// The puts' groups per master and seqs per master need it from
		// the first put on (slots.go).
		s.slots.refreshing = true
		s.readSlots()
	}
	s.fan = newFanout()
	s.channels = s.eventChannels()
	s.leases = newLeases(s)
	if err := s.leases.round(ctx); err != nil {
		s.cancel()
		c.Close()
		return nil, err
	}
	s.wg.Add(2)
	go func() { defer s.wg.Done(); s.leases.run(s.ctx) }()
	go func() { defer s.wg.Done(); s.subscribe(s.ctx) }()
	return s, nil
}

// clientOptions turns Options into rueidis options: short dial and write
// timeouts so requests fail fast (503) while Redis is away.
func clientOptions(opt Options) (rueidis.ClientOption, error) {
	var copt rueidis.ClientOption
	switch {
	case opt.URL != "":
		var err error
		if copt, err = rueidis.ParseURL(opt.URL); err != nil {
			return copt, fmt.Errorf("bad redis url %q: %w", opt.URL, err)
		}
	case len(opt.Addrs) > 0:
		copt.InitAddress = opt.Addrs
	default:
		return copt, errors.New("no redis address (set --redis)")
	}
	copt.DisableCache = true
	// No automatic retries: a request fails fast with 503 while Redis is
	// away (rueidis would otherwise retry until the context ends), and a
	// script that may have run is never sent twice.
	copt.DisableRetry = true
	if copt.Dialer.Timeout == 0 {
		copt.Dialer.Timeout = 2 * time.Second
	}
	if copt.ConnWriteTimeout == 0 {
		copt.ConnWriteTimeout = 3 * time.Second
	}
	return copt, nil
}

// describe names the Redis of opt in errors, without a password.
func describe(opt Options) string {
	if opt.URL != "" {
		if i := strings.Index(opt.URL, "@"); i >= 0 {
			if j := strings.Index(opt.URL, "://"); j >= 0 && j < i {
				return opt.URL[:j+3] + "***" + opt.URL[i:]
			}
		}
		return opt.URL
	}
	return strings.Join(opt.Addrs, ",")
}

// checkServer refuses a Redis too old for the scripts (ZADD LT needs 6.2)
// and warns about settings that break delayq's promises.
func (s *Store) checkServer(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := s.c.Do(ctx, s.c.B().Info().Section("server").Build()).ToString()
	if err != nil {
		return fmt.Errorf("redisstore: connect %s: %w: %w", describe(s.opt), delayq.ErrUnavailable, err)
	}
	v := infoField(info, "redis_version")
	if versionBelow(v, 6, 2) {
		return fmt.Errorf("redisstore: %s runs redis %s; delayq needs 6.2 or later", describe(s.opt), v)
	}
	s.sharded = !s.oneNode && !versionBelow(v, 7, 0)
	if err := s.checkPersistence(ctx); err != nil {
		return err
	}
	s.warnConfig(ctx)
	return s.checkMeta(ctx)
}

// warnConfig logs settings that can lose jobs. Managed Redis often refuses
// CONFIG GET; then nothing is said.
func (s *Store) warnConfig(ctx context.Context) {
	for param, want := range map[string]string{"appendonly": "yes", "maxmemory-policy": "noeviction"} {
		m, err := s.c.Do(ctx, s.c.B().ConfigGet().Parameter(param).Build()).AsStrMap()
		if err != nil || m[param] == "" || m[param] == want {
			continue
		}
		s.log.Warn("redis setting can lose acknowledged jobs (see docs/redis.md)", "setting", param, "value", m[param], "want", want)
	}
}

// checkPersistence refuses a Redis node that persists nothing (appendonly
// no and no RDB save points): its restart loses every acknowledged job.
// Every node is asked (each Cluster master keeps its own data). A node
// whose CONFIG GET is refused (managed services rename or disable CONFIG)
// is asked INFO persistence, which shows AOF but not the save points: an
// AOF node passes, any other is refused with what to do. Options.Volatile
// skips the check and logs what it skipped.
func (s *Store) checkPersistence(ctx context.Context) error {
	if s.opt.Volatile {
		s.log.Warn("redis persistence not checked (--redis-volatile): a Redis restart without AOF or RDB loses acknowledged jobs")
		return nil
	}
	nodes := s.c.Nodes()
	addrs := make([]string, 0, len(nodes))
	for a := range nodes {
		addrs = append(addrs, a)
	}
	slices.Sort(addrs)
	for _, addr := range addrs {
		if err := persistence(ctx, nodes[addr]); err != nil {
			return fmt.Errorf("redisstore: redis %s: %w; refusing to start (pass --redis-volatile to run anyway, accepting that a Redis restart loses acknowledged jobs; see docs/redis.md)", addr, err)
		}
	}
	return nil
}

// persistence says why node does not persist, or nil when it does.
func persistence(ctx context.Context, node rueidis.Client) error {
	aof, aerr := node.Do(ctx, node.B().ConfigGet().Parameter("appendonly").Build()).AsStrMap()
	save, serr := node.Do(ctx, node.B().ConfigGet().Parameter("save").Build()).AsStrMap()
	if aerr == nil && serr == nil {
		if aof["appendonly"] == "yes" || strings.TrimSpace(save["save"]) != "" {
			return nil
		}
		return errors.New("persists nothing (appendonly no, and save is empty: no RDB snapshots)")
	}
	cerr := aerr
	if cerr == nil {
		cerr = serr
	}
	if rueidis.IsRedisNil(cerr) || !isRedisErr(cerr) {
		return fmt.Errorf("%w: %w", delayq.ErrUnavailable, cerr)
	}
	info, err := node.Do(ctx, node.B().Info().Section("persistence").Build()).ToString()
	if err == nil && infoField(info, "aof_enabled") == "1" {
		return nil
	}
	return fmt.Errorf("cannot tell whether it persists: CONFIG GET is refused (%v) and INFO persistence shows no AOF", cerr)
}

// isRedisErr reports whether err is an error reply from Redis (not a
// connection error).
func isRedisErr(err error) bool {
	_, ok := rueidis.IsRedisErr(err)
	return ok
}

func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}

func versionBelow(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, _ := strconv.Atoi(parts[0])
	mi, _ := strconv.Atoi(parts[1])
	return ma < major || ma == major && mi < minor
}

// Close stops the lease and event loops, hands this instance's buckets
// back at once (so the others take them without waiting for the leases
// to run out) and closes the connections.
func (s *Store) Close() error {
	if s.ctx.Err() != nil {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.leases.releaseAll(ctx)
	s.fan.Close()
	s.c.Close()
	return nil
}

var errClosed = fmt.Errorf("redisstore: closed: %w", delayq.ErrUnavailable)

// check fails fast once the store is closed.
func (s *Store) check() error {
	if s.ctx.Err() != nil {
		return errClosed
	}
	return nil
}

// unavailable wraps a Redis or connection error: callers see
// delayq.ErrUnavailable (HTTP 503) with the cause named.
func unavailable(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("redisstore: %s: %w", op, err)
	}
	return fmt.Errorf("redisstore: %s: %w: redis: %w", op, delayq.ErrUnavailable, err)
}

// nonce returns 16 random hex digits.
func nonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ms is t in unix milliseconds (the store's precision); 0 for the zero time.
func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return delayq.TruncMilli(t).UnixMilli()
}

func msString(t time.Time) string { return strconv.FormatInt(ms(t), 10) }

// fromMS is the inverse of ms.
func fromMS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v).UTC()
}

func nowMS() int64 { return time.Now().UnixMilli() }
