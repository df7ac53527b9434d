// Package diskstore is the embedded, durable store.Store: one process owns
// the data in a Pebble database on local disk.
//
// Every transition is durable before the method returns, through group
// commit (commit.go): a method validates against memory and changes it
// under the store mutex, adds its keys to the open group (one Pebble
// batch collecting every transition staged since the last commit), and
// waits outside the mutex until a committer goroutine has committed that
// group and its fsync is done. The group's WAL order is the order of the
// memory changes.
//
// Memory holds the counters and pause of every topic, the ready jobs (a
// heap per topic), the reserved jobs (a deadline heap) and only the near
// future of the delayed jobs: a heap loaded in chunks from the due index
// on disk (see near.go). Within the hot budget (Options.HotSize) those
// jobs keep their records, bodies included, so reserve, finish and the
// timer read nothing from Pebble. Open reads the counters, the ready and
// reserved index entries and one chunk of the due index, so it does not
// slow down with the number of delayed or buried jobs.
//
// The package does not own semantics beyond the store contract: validation
// of names and limits is the engine's.
package diskstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var _ store.Store = (*Store)(nil)

// Options configures Open. The zero value is ready to use.
type Options struct {
	// Logger receives Pebble's warnings and errors. Defaults to a logger
	// that discards everything.
	Logger *slog.Logger
	// MemTableSize is the size of Pebble's memtable in bytes. Defaults to
	// 64 MiB (see pebbleOptions for why).
	MemTableSize uint64
	// CacheSize is the size of Pebble's block cache in bytes. Defaults to
	// 128 MiB.
	CacheSize int64
	// HotSize bounds, in bytes, the job records kept in memory beside
	// the ready, reserved and near-future delayed jobs' index entries
	// (see hotSize for how a job is counted), so that reserve, finish and
	// the timer read nothing from Pebble. Records beyond it are spilled:
	// the job keeps its place and its record is read from Pebble when
	// needed. Defaults to 128 MiB; a negative value keeps none.
	HotSize int
	// MinFree is the free space, in bytes, below which the store refuses
	// new jobs with ErrDiskFull (see space.go). Defaults to 256 MiB; a
	// negative value turns the check off.
	MinFree int64
	// SyncEvery, when positive, answers a transition once its WAL record
	// is written to the operating system and fdatasyncs the WAL at least
	// this often (fsync.go): a kill -9 loses nothing acknowledged, a
	// power loss at most this window. Zero (the default) syncs before
	// every answer.
	SyncEvery time.Duration
	// Ballast is the size, in bytes, of the file the store keeps in its
	// data directory and releases when the disk is full (ballast.go).
	// 0 keeps none.
	Ballast int64
	// Retention is how long the store keeps the jobs it removes
	// (finished, deleted, failed; see store.Retention), readable with
	// their ids taken (retain.go); the zero value keeps none.
	Retention store.Retention

	// BackgroundP raises the process's GOMAXPROCS by one while each of
	// Pebble's flushes and compactions runs, so that the requests keep
	// the Ps they had, and gives Go its default back once none runs
	// (background.go). Off by default: it changes a process-wide setting,
	// stops the world at each change and replaces a GOMAXPROCS the
	// program set itself, so only a program that owns that setting may
	// opt in. The server does not.
	BackgroundP bool

	// nearChunk is how many due-index entries one load brings into memory;
	// tests lower it. Defaults to defaultNearChunk.
	nearChunk int
	// fs replaces the real filesystem in tests that inject I/O errors.
	fs vfs.FS
	// pebbleFS is the filesystem Pebble writes through: fs wrapped so
	// that an ENOSPC releases the ballast (set by Open).
	pebbleFS vfs.FS
	// reclaimAfter and reclaimEvery, in tests, replace
	// defaultReclaimAfter and defaultReclaimEvery (reclaim.go); a
	// negative reclaimAfter turns reclaims off.
	reclaimAfter int
	reclaimEvery time.Duration
	// pebbleEvents, in tests, hears Pebble's events (flushes, compactions).
	pebbleEvents *pebble.EventListener
	// pebbleOpened, in tests, is called when pebble.Open has returned,
	// before compactions are let run.
	pebbleOpened func()
	// freeBytes replaces statfs in tests. Defaults to statfsFree.
	freeBytes func(dir string) (uint64, error)
	// damage hears the damage Pebble meets (damage.go; set by Open).
	damage *damageLog
}

const (
	defaultMemTableSize = 64 << 20
	defaultCacheSize    = 128 << 20 // as config.Default's CacheMiB
	defaultHotSize      = 128 << 20 // as config.Default's HotMiB
	defaultMinFree      = 256 << 20 // as config.Default's MinFreeMiB
	defaultNearChunk    = 4096
	defaultTickMax      = 1000
)

// fsOrDefault is the filesystem Pebble and the checks use.
func (o *Options) fsOrDefault() vfs.FS {
	if o.fs == nil {
		return vfs.Default
	}
	return o.fs
}

func (o *Options) setDefaults() {
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.MemTableSize == 0 {
		o.MemTableSize = defaultMemTableSize
	}
	if o.CacheSize == 0 {
		o.CacheSize = defaultCacheSize
	}
	if o.HotSize == 0 {
		o.HotSize = defaultHotSize
	}
	if o.MinFree == 0 {
		o.MinFree = defaultMinFree
	}
	if o.freeBytes == nil {
		o.freeBytes = statfsFree
	}
	if o.nearChunk <= 0 {
		o.nearChunk = defaultNearChunk
	}
}

// Store is the embedded store.Store. Create it with Open.
type Store struct {
	db    *pebble.DB   // replaced only by a read-only store's reopen, under mu and dbMu
	dbMu  sync.RWMutex // held for reading by calls that use db outside mu (outside)
	lock  *pebble.Lock // the directory lock, held from before the WAL check until Close, across a reopen
	wal   *lazyWALFS   // the filesystem whose WAL syncs the store makes (fsync.go)
	opts  Options      // as given to Open, defaults set
	chunk int          // due-index entries per near-future load

	store.CommitHook // times each group commit (delayq_store_commit_seconds)

	kick chan struct{} // capacity 1: the open group has work (commit.go)
	stop chan struct{} // closed by Close: the committer commits what is left and ends
	// unsynced holds written groups waiting for an fsync round (commit.go)
	unsynced unsynced
	bg       sync.WaitGroup // the committer, each group's await and calls outside the mutex (outside)
	dir      string         // the data directory
	log      *slog.Logger   // Options.Logger

	mu        sync.Mutex
	closed    bool                      // guarded by mu
	failed    error                     // set once a write failed; guarded by mu
	readOnly  error                     // why the store takes no transitions (readonly.go); guarded by mu
	watching  bool                      // watchSpace runs; guarded by mu
	open      *group                    // transitions not yet committed to Pebble; guarded by mu
	tail      *group                    // the newest group that has a transition; guarded by mu
	seq       uint64                    // last seq assigned; guarded by mu
	seqOnDisk uint64                    // last seq written under metaSeqKey; guarded by mu
	commit    uint64                    // number of the last group committed (acked.go); guarded by mu
	marks     markFile                  // the acknowledged high-water mark (acked.go)
	stats     struct{ groups, ops int } // groups committed and their transitions (benchmarks); guarded by mu
	clock     store.Clock               // guarded by mu
	topics    map[string]*topic         // guarded by mu
	entries   map[uint64]*entry         // in-memory jobs by seq; guarded by mu
	byID      map[string]*entry         // the same entries by id; guarded by mu
	hot       int                       // bytes of records held by entries; guarded by mu
	hotMax    int                       // budget for hot; records beyond it stay on disk only
	reserved  queue                     // reserved jobs by deadline; guarded by mu
	near      nearFuture                // guarded by mu
	space     space                     // guarded by mu
	ballast   *ballast                  // headroom released when the disk is full (ballast.go)
	recBuf    []byte                    // scratch for encoding records (txn.stage); guarded by mu
	exp       expiry                    // what memory knows of the retained jobs' expiry index (retain.go); guarded by mu
	reclaim   reclaimer                 // flushes and compactions after expiry (reclaim.go)
	txnBatch  *pebble.Batch             // an empty batch for the next txn, or nil; guarded by mu
	txnFree   *txn                      // the txn the last transition released, for the next; guarded by mu
	topicBuf  []*topic                  // scratch for serving; guarded by mu
	spare     chan spareBatch           // empty group batches for reuse (recycle)
	series    seriesState               // chart series writes (series.go)
	damage    *damageLog                // the damage reads met (damage.go)

	// kickAt is the open group's size at which a transition wakes the
	// committer (commit.go); guarded by mu.
	kickAt int
	// wakes counts the committer's wake-ups (benchmarks, tests); guarded
	// by mu.
	wakes int
	// groupTopics and groupIDs are the emptied sets of the last
	// committed group, for the next one (reuseSets); guarded by mu.
	groupTopics, groupIDs map[string]bool
}

// topic is what memory keeps of a topic: its counters and pause (mirrored
// in its C key) and its ready jobs.
type topic struct {
	counts
	byPri   queue // ready jobs in serving order (slot 0)
	byDue   queue // ready jobs by the time they became ready (slot 1)
	spillAt int   // where spill looks next in byPri, counting from the back
}

func newTopic() *topic {
	return &topic{byPri: queue{less: byPriority, slot: 0}, byDue: queue{less: byDue, slot: 1}}
}

// Open opens the store in dir, creating it if needed. Only one process may
// have a store open at a time (the store holds Pebble's directory lock
// until Close, across a read-only start's reopen too).
//
// On a filesystem without room for Pebble's opening flush, Open opens the
// store read-only instead of hanging in Pebble (see readonly.go).
func Open(dir string, opts Options) (*Store, error) {
	opts.setDefaults()
	// Both modes sync the WAL below Pebble: the window's loop, or the
	// store right after each group's write (commit.go).
	lazy := newLazyWALFS(opts.fsOrDefault(), max(opts.SyncEvery, 0), opts.Logger)
	opts.fs = lazy
	fs := opts.fsOrDefault()
	lock, err := lockDir(fs, dir)
	if err != nil {
		lazy.closeIfAny()
		return nil, err
	}
	s := &Store{
		dir:   dir,
		opts:  opts,
		log:   opts.Logger,
		lock:  lock,
		chunk: opts.nearChunk,
		space: space{floor: uint64(max(opts.MinFree, 0)), free: opts.freeBytes},
		kick:  make(chan struct{}, 1),
		spare: make(chan spareBatch, 2),
		stop:  make(chan struct{}),
		tail:  closedGroup,
		wal:   lazy,
		// The committer starts with nothing in flight.
		kickAt: 1,
	}
	s.damage = newDamageLog(opts.Logger)
	s.opts.damage = s.damage
	s.ballast = newBallast(fs, dir, opts.Ballast)
	s.opts.pebbleFS = s.ballastFS(fs)
	readOnly, why := s.startReadOnly(fs)
	if err := s.openDB(readOnly); err != nil {
		_ = lock.Close()
		lazy.closeIfAny()
		return nil, err
	}
	if readOnly {
		s.readOnly = why
		s.log.Error("diskstore: opened read-only: " + why.Error())
		s.watching = true
		s.bg.Add(1)
		go s.watchSpace()
	} else {
		s.placeBallast()
	}
	if s.window() {
		lazy.start(s.lazyRound)
	}
	s.bg.Add(1)
	go s.committer()
	return s, nil
}

// openDB opens Pebble (read-only or not) and loads memory from it: the
// state a new store starts from, and a read-only store's reopen. Requires
// mu or a store nobody else sees yet.
func (s *Store) openDB(readOnly bool) error {
	db, commit, err := openPebble(s.dir, s.opts, s.lock, readOnly)
	if err != nil {
		return err
	}
	s.db, s.commit = db, commit
	s.topics = make(map[string]*topic)
	s.entries = make(map[uint64]*entry)
	s.byID = make(map[string]*entry)
	s.hot, s.hotMax = 0, s.opts.HotSize
	s.reserved = queue{less: byAt}
	s.near = nearFuture{q: queue{less: byAt}}
	s.seq = 0
	s.exp = expiry{}
	s.txnBatch = nil // it belonged to the instance before a reopen
	s.open, s.tail = s.newGroup(), closedGroup
	start := time.Now()
	if err := s.load(readOnly); err != nil {
		_ = db.Close()
		if ce := asCorruption(err, s.dir); ce != nil {
			ce.Dir = s.dir
			err = ce
		}
		return fmt.Errorf("diskstore: open %s: %w", s.dir, err)
	}
	s.seqOnDisk = s.seq
	s.log.Debug("diskstore: memory loaded", "took", time.Since(start).Round(time.Microsecond), "entries", len(s.entries))
	return nil
}

// Close waits for writers still syncing and closes the database. Calls
// after Close fail with ErrUnavailable.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	close(s.stop)
	s.bg.Wait()
	err := s.db.Close()
	s.wal.closeIfAny() // after Pebble closed its WAL, which synced it
	err = errors.Join(err, s.marks.close())
	if lerr := s.lock.Close(); err == nil {
		err = lerr
	}
	if err != nil {
		return fmt.Errorf("diskstore: close: %w", err)
	}
	return nil
}

// window reports whether the store answers before the fsync
// (Options.SyncEvery, --fsync DURATION).
func (s *Store) window() bool { return s.opts.SyncEvery > 0 }

var errClosed = fmt.Errorf("diskstore: closed: %w", delayq.ErrUnavailable)

// usable reports why the store takes no calls. Requires mu.
func (s *Store) usable() error {
	if s.closed {
		return errClosed
	}
	return s.failed
}

// writable reports why the store takes no transition. Requires mu.
func (s *Store) writable() error {
	if err := s.usable(); err != nil {
		return err
	}
	return s.readOnly
}

// fail marks the store failed after a write error: memory may be ahead of
// the disk, so nothing more may be served. Requires mu.
//
// A failure for want of space (ENOSPC) is one the store can come back
// from: what is on disk is every acknowledged transition, so once there is
// room again watchSpace reopens the store from disk (readonly.go).
func (s *Store) fail(op string, err error) error {
	if s.failed == nil {
		s.failed = fmt.Errorf("diskstore: failed during %s: %w: %w", op, delayq.ErrUnavailable, err)
		if errors.Is(err, syscall.ENOSPC) && !s.closed && !s.watching {
			s.log.Error("diskstore: out of disk space; the store takes no calls until space is freed, then reopens itself", "err", err)
			s.watching = true
			s.bg.Add(1)
			go s.watchSpace()
		}
	}
	return s.failed
}

// unavailable wraps an I/O or decoding error of a read (see readErr).
func unavailable(op string, err error) error { return readErr(op, err) }

// read runs fn under the mutex for a call that changes nothing. What fn
// saw may include transitions whose group is not durable yet, so read
// returns only once the newest group is.
func (s *Store) read(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	err := fn()
	g := s.tail
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.wait(ctx, g)
}

// outside runs fn on the open store without the store mutex, for calls
// that use the db handle but not the job path's state (schedules,
// backups): it refuses a closed or failed store and keeps Close waiting
// until fn is done with the db. It joins s.bg for that: Close waits for
// bg before it closes the db, and an Add made under mu while the store is
// open comes before Close's Wait. It holds dbMu for reading, so that a
// read-only store's reopen does not swap the db under fn. A write (write
// true) is refused while the store is read-only.
func (s *Store) outside(ctx context.Context, write bool, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	check := s.usable
	if write {
		check = s.writable
	}
	if err := check(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.bg.Add(1)
	s.mu.Unlock()
	defer s.bg.Done()
	s.dbMu.RLock()
	defer s.dbMu.RUnlock()
	return fn()
}

// wait waits for g to be durable.
func (s *Store) wait(ctx context.Context, g *group) error {
	select {
	case <-g.done:
		return g.err
	case <-ctx.Done():
		// The transition may still become durable; the caller cannot
		// know, as with any request whose reply was lost.
		return ctx.Err()
	}
}

// write runs one transition: fn validates and stages it into a txn under
// the mutex; write applies the txn to memory, adds its batch to the open
// group (commit.go), releases the mutex and waits for the group to be
// durable, together with every transition staged alongside it.
func (s *Store) write(ctx context.Context, op string, fn func(t *txn) error) error {
	g, err := s.stage(ctx, fn)
	if err != nil {
		return err
	}
	// A transition is acknowledged only once durable: ctx does not cut
	// the wait short, so a caller never sees "canceled" for a change
	// that then survives. (Background rather than WithoutCancel(ctx):
	// the same wait, without an allocation per transition.)
	return s.wait(context.Background(), g)
}

// stage is write without the wait: it returns the group that holds the
// transition (closedGroup when fn staged nothing).
func (s *Store) stage(ctx context.Context, fn func(t *txn) error) (*group, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	if err := s.writable(); err != nil {
		s.mu.Unlock()
		return nil, err
	}
	t := s.newTxn()
	if err := fn(t); err != nil {
		t.abort()
		s.mu.Unlock()
		return nil, err
	}
	if t.empty() {
		t.abort()
		s.mu.Unlock()
		return closedGroup, nil
	}
	t.apply()
	g := s.stageGroup(t)
	t.release()
	s.mu.Unlock()
	return g, nil
}

// get returns a copy of the value of key; found is false when it is
// absent. It commits the open group first, so Pebble has every change
// memory has.
// Requires mu.
func (s *Store) get(key []byte) (val []byte, found bool, err error) {
	s.flushLocked()
	return s.peek(key)
}

// peek is get without committing the open group first: for keys the
// caller knows the open group does not write. Requires mu.
func (s *Store) peek(key []byte) (val []byte, found bool, err error) {
	v, closer, err := s.db.Get(key)
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	val = append([]byte(nil), v...)
	_ = closer.Close()
	return val, true, nil
}

// lookup returns the live job ref names, from memory when it is hot,
// else from Pebble: a retained job is not found. The job must not be
// modified. Requires mu.
func (s *Store) lookup(ref delayq.Ref) (*delayq.Job, error) {
	j, err := s.lookupAny(ref)
	if err == nil && j.State.Retained() {
		return nil, fmt.Errorf("diskstore: job %s: %w", ref, delayq.ErrNotFound)
	}
	return j, err
}

// lookupAny is lookup that also finds a retained job, expired or not.
// Requires mu.
func (s *Store) lookupAny(ref delayq.Ref) (*delayq.Job, error) {
	var e *entry
	if ref.ID != "" {
		e = s.byID[ref.ID]
	} else {
		e = s.entries[ref.Seq]
	}
	if e != nil {
		return s.mustRecord(e)
	}
	id := ref.ID
	if id == "" {
		v, ok, err := s.get(seqKey(ref.Seq))
		if err != nil {
			return nil, unavailable("get job "+ref.String(), err)
		}
		if !ok {
			return nil, fmt.Errorf("diskstore: job %s: %w", ref, delayq.ErrNotFound)
		}
		id = string(v)
	}
	j, ok, err := s.record(id)
	if err != nil {
		return nil, err
	}
	if !ok || (ref.ID == "" && j.Seq != ref.Seq) {
		return nil, fmt.Errorf("diskstore: job %s: %w", ref, delayq.ErrNotFound)
	}
	return j, nil
}

// record reads and decodes the record of id. Requires mu.
func (s *Store) record(id string) (*delayq.Job, bool, error) {
	v, ok, err := s.get(jobKey(id))
	if err != nil || !ok {
		if err != nil {
			err = unavailable(fmt.Sprintf("get job %q", id), err)
		}
		return nil, false, err
	}
	j, err := openRecord(v)
	if err != nil {
		return nil, false, unavailable(fmt.Sprintf("decode job %q", id), err)
	}
	return j, true, nil
}

// topic returns the in-memory topic, creating it. Requires mu.
func (s *Store) topic(name string) *topic {
	tp := s.topics[name]
	if tp == nil {
		tp = newTopic()
		s.topics[name] = tp
	}
	return tp
}

// iter opens an iterator over Pebble after committing the open group (see
// get). Requires mu.
func (s *Store) iter(o *pebble.IterOptions) (*pebble.Iterator, error) {
	s.flushLocked()
	return s.db.NewIter(o)
}

// locked reports whether Open failed because another process (flock
// answers EAGAIN) or this one (Pebble's own check) holds the directory.
func locked(err error) bool {
	return errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EWOULDBLOCK) ||
		strings.Contains(err.Error(), "lock held by current process")
}
