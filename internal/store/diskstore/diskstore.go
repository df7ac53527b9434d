// Package diskstore is the embedded, durable store.Store: one process owns
// the data in a Pebble database on local disk.
//
// Every transition is one synced Pebble batch, durable before the method
// returns. Concurrent writers share fsyncs through Pebble's commit
// pipeline (group commit): a method holds the store mutex only while it
// validates against memory, builds its batch and hands it to
// DB.ApplyNoSyncWait, which fixes its place in the WAL; it then waits for
// the fsync outside the mutex, together with every other writer queued
// behind the same sync. Memory is changed only after Pebble accepted the
// batch, so the WAL order is the order of the in-memory mutations.
//
// Memory holds the counters and pause of every topic, the ready jobs (a
// heap per topic), the reserved jobs (a deadline heap) and only the near
// future of the delayed jobs: a heap loaded in chunks from the due index
// on disk (see near.go). Bodies stay on disk. Open reads the counters, the
// ready and reserved index entries and one chunk of the due index, so it
// does not slow down with the number of delayed or buried jobs.
//
// The package does not own semantics beyond the store contract: validation
// of names and limits is the engine's.
package diskstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

	// nearChunk is how many due-index entries one load brings into memory;
	// tests lower it. Defaults to defaultNearChunk.
	nearChunk int
	// fs replaces the real filesystem in tests that inject I/O errors.
	fs vfs.FS
}

const (
	defaultMemTableSize = 64 << 20
	defaultCacheSize    = 128 << 20 // as config.Default's CacheMiB
	defaultNearChunk    = 4096
	defaultTickMax      = 1000
)

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
	if o.nearChunk <= 0 {
		o.nearChunk = defaultNearChunk
	}
}

// Store is the embedded store.Store. Create it with Open.
type Store struct {
	db    *pebble.DB
	chunk int // due-index entries per near-future load

	inflight sync.WaitGroup // writers waiting for their fsync; Close waits for them

	mu       sync.Mutex
	closed   bool              // guarded by mu
	failed   error             // set once a write failed; guarded by mu
	seq      uint64            // last seq assigned; guarded by mu
	last     time.Time         // latest Now acted at; guarded by mu
	topics   map[string]*topic // guarded by mu
	entries  map[uint64]*entry // in-memory jobs by seq; guarded by mu
	reserved queue             // reserved jobs by deadline; guarded by mu
	near     nearFuture        // guarded by mu
}

// topic is what memory keeps of a topic: its counters and pause (mirrored
// in its C key) and its ready jobs.
type topic struct {
	counts
	byPri queue // ready jobs in serving order (slot 0)
	byDue queue // ready jobs by the time they became ready (slot 1)
}

func newTopic() *topic {
	return &topic{byPri: queue{less: byPriority, slot: 0}, byDue: queue{less: byDue, slot: 1}}
}

// Open opens the store in dir, creating it if needed. Only one process may
// have a store open at a time (Pebble locks the directory).
func Open(dir string, opts Options) (*Store, error) {
	opts.setDefaults()
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref()
	db, err := pebble.Open(dir, pebbleOptions(opts, cache))
	if err != nil {
		return nil, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	s := &Store{
		db:       db,
		chunk:    opts.nearChunk,
		topics:   make(map[string]*topic),
		entries:  make(map[uint64]*entry),
		reserved: queue{less: byAt},
		near:     nearFuture{q: queue{less: byAt}},
	}
	if err := s.load(); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	return s, nil
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
	s.inflight.Wait()
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("diskstore: close: %w", err)
	}
	return nil
}

var errClosed = fmt.Errorf("diskstore: closed: %w", delayq.ErrUnavailable)

// usable reports why the store takes no calls. Requires mu.
func (s *Store) usable() error {
	if s.closed {
		return errClosed
	}
	return s.failed
}

// fail marks the store failed after a write error: memory may be ahead of
// the disk, so nothing more may be served. Requires mu.
func (s *Store) fail(op string, err error) error {
	if s.failed == nil {
		s.failed = fmt.Errorf("diskstore: failed during %s: %w: %w", op, delayq.ErrUnavailable, err)
	}
	return s.failed
}

// unavailable wraps an I/O or decoding error of a read.
func unavailable(op string, err error) error {
	return fmt.Errorf("diskstore: %s: %w: %w", op, delayq.ErrUnavailable, err)
}

// read runs fn under the mutex for a call that changes nothing.
func (s *Store) read(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.usable(); err != nil {
		return err
	}
	return fn()
}

// write runs one transition: fn validates and stages it into a txn under
// the mutex; write applies the batch to Pebble (fixing its WAL position),
// applies the txn to memory, releases the mutex and waits for the fsync
// it shares with concurrent writers.
func (s *Store) write(ctx context.Context, op string, fn func(t *txn) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	t := s.newTxn()
	if err := fn(t); err != nil {
		t.abort()
		s.mu.Unlock()
		return err
	}
	if t.empty() {
		t.abort()
		s.mu.Unlock()
		return nil
	}
	t.finish()
	if err := s.db.ApplyNoSyncWait(t.b, pebble.Sync); err != nil {
		// The batch is not closed: Pebble may still reference it.
		t.restore()
		err = s.fail(op, err)
		s.mu.Unlock()
		return err
	}
	t.apply()
	s.inflight.Add(1)
	s.mu.Unlock()
	defer s.inflight.Done()
	err := t.b.SyncWait()
	if err != nil {
		s.mu.Lock()
		err = s.fail(op, err)
		s.mu.Unlock()
		return err
	}
	_ = t.b.Close()
	return nil
}

// get returns a copy of the value of key; found is false when it is absent.
func (s *Store) get(key []byte) (val []byte, found bool, err error) {
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

// lookup reads the live job ref names. Requires mu.
func (s *Store) lookup(ref delayq.Ref) (*delayq.Job, error) {
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
	j, err := decodeRecord(v)
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

// now returns the time to act at: p.Now in store precision, or the latest
// Now acted at if that is later (the contract's "Now never goes back"), so
// a reservation never starts before the Tick that readied its job.
// Requires mu.
func (s *Store) now(t time.Time) time.Time {
	t = delayq.TruncMilli(t)
	if t.Before(s.last) {
		return s.last
	}
	s.last = t
	return t
}
