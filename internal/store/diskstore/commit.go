package diskstore

import (
	"encoding/binary"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// Group commit.
//
// A transition validates and changes memory under the store mutex and
// adds its keys to the open group: one Pebble batch that collects every
// transition staged since the last commit. The committer goroutine takes
// the open group (under the mutex, so the WAL order is the order of the
// memory changes), applies it to Pebble in one commit and starts its
// await, which waits for its WAL write and its fsync (overlapping syncs,
// below) and wakes every transition of the group at once. So a burst of concurrent puts, reserves and finishes
// costs one Pebble commit and one sync per group instead of one per
// transition, and keys that every transition would rewrite (a topic's
// counters, the last seq) are written once per group.
//
// Memory runs ahead of the disk only by the open and in-flight groups,
// and nothing leaves the store before its group is durable: a transition
// returns after its group's sync, and a read (Get, List, Topics) waits for
// the group that holds the newest change it could have seen. A Pebble
// read under the mutex first applies the open group (flushLocked), so it
// sees every change memory has.
//
// A commit or sync error fails the store (fail): memory is then ahead of
// the disk, and every transition of that group and later ones gets the
// error.

// group is one commit's worth of transitions.
type group struct {
	b      *pebble.Batch
	db     *pebble.DB      // the instance b belongs to
	topics map[string]bool // topics whose counters changed
	ids    map[string]bool // jobs whose records the group writes
	ops    int             // transitions staged
	done   chan struct{}   // closed once the group is durable or failed
	err    error           // set before done closes
	start  time.Time       // when its commit began; zero unless observed
	commit uint64          // its commit number; seq: the last job seq then (acked.go)
	seq    uint64
}

func (s *Store) newGroup() *group {
	var b *pebble.Batch
	select {
	case sp := <-s.spare:
		if sp.db == s.db {
			b = sp.b
		} else { // from before a reopen
			_ = sp.b.Close()
		}
	default:
	}
	if b == nil {
		b = s.db.NewBatch(pebble.WithMaxRetainedSizeBytes(maxSpareBatch))
	}
	g := &group{b: b, db: s.db, topics: s.groupTopics, ids: s.groupIDs, done: make(chan struct{})}
	s.groupTopics, s.groupIDs = nil, nil
	if g.topics == nil {
		g.topics, g.ids = make(map[string]bool), make(map[string]bool)
	}
	return g
}

// maxReusedIDs is the largest group whose sets newGroup reuses: clearing
// a map costs its capacity, and a large group (a timer step of a thousand
// jobs) is rare.
const maxReusedIDs = 256

// reuseSets keeps a committed group's topic and id sets, emptied, for the
// next group: filling fresh ones, and growing them as a group gathers,
// was a few per cent of a reserve+delete's CPU. Nothing reads them once
// flushLocked has written the group's counters. Requires mu.
func (s *Store) reuseSets(g *group) {
	if len(g.ids) <= maxReusedIDs && len(g.topics) <= maxReusedIDs {
		clear(g.topics)
		clear(g.ids)
		s.groupTopics, s.groupIDs = g.topics, g.ids
	}
	g.topics, g.ids = nil, nil
}

// Batch reuse.
//
// A group grows by appending whole transitions, and Go's append grows a
// large slice by a quarter at a time: a 400 KiB group (one timer step of
// 1,000 jobs) was copied over a dozen times as it grew, and a fresh batch
// per group and per transition repeated that every time. Batches in
// Pebble's pool drop buffers over 1 MiB. So a group's batch, once durable,
// goes back to the store (spare) with its buffer, and one txn batch is
// kept for the next transition (txnBatch): together they were a third of
// the bytes the server allocated while 100,000 jobs due at once drained.

// maxSpareBatch is the largest buffer a reused group batch keeps.
const maxSpareBatch = 8 << 20

// spareBatch is an empty group batch and the Pebble instance it belongs
// to: a read-only start's reopen replaces the instance.
type spareBatch struct {
	b  *pebble.Batch
	db *pebble.DB
}

// recycle offers a durable group's batch for reuse by a later group.
func (s *Store) recycle(g *group) {
	g.b.Reset()
	select {
	case s.spare <- spareBatch{g.b, g.db}:
	default:
		_ = g.b.Close()
	}
}

// closedGroup is a group with nothing to wait for.
var closedGroup = func() *group {
	g := &group{done: make(chan struct{})}
	close(g.done)
	return g
}()

// stageGroup adds a staged transition to the open group and wakes the
// committer. It returns the group to wait for. Requires mu.
func (s *Store) stageGroup(t *txn) *group {
	g := s.open
	if err := g.b.Apply(t.b, nil); err != nil {
		// Apply only fails on a corrupt batch representation, which
		// this package never builds.
		panic("diskstore: group apply: " + err.Error())
	}
	for name := range t.counts {
		g.topics[name] = true
	}
	for _, c := range t.changes {
		if c.old != nil {
			g.ids[c.old.ID] = true
		} else {
			g.ids[c.new.ID] = true
		}
	}
	g.ops++
	s.tail = g
	if g.ops >= s.kickAt {
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return g
}

// flushLocked commits the open group to Pebble (not waiting for its sync)
// and opens a new one. Requires mu.
func (s *Store) flushLocked() {
	g := s.open
	if g.ops == 0 {
		return
	}
	for name := range g.topics {
		if tp := s.topics[name]; tp != nil && !tp.empty() {
			g.b.Set(counterKey(name), encodeCounts(&tp.counts), nil)
		} else {
			g.b.Delete(counterKey(name), nil)
		}
	}
	s.reuseSets(g)
	s.open = s.newGroup()
	if s.seq != s.seqOnDisk {
		g.b.Set(metaSeqKey, binary.BigEndian.AppendUint64(nil, s.seq), nil)
		s.seqOnDisk = s.seq
	}
	s.markGroup(g)
	if s.failed != nil {
		g.err = s.failed
		close(g.done)
		return
	}
	if s.Observing() {
		g.start = time.Now()
	}
	if err := s.db.ApplyNoSyncWait(g.b, pebble.Sync); err != nil {
		// The batch is not closed: Pebble may still reference it.
		g.err = s.fail("commit", err)
		close(g.done)
		return
	}
	s.unsynced.add(g) // in commit order: under mu
	s.bg.Add(1)
	go s.await(g)
	s.stats.groups++
	s.stats.ops += g.ops
}

// committer applies the open group whenever a transition wakes it, until
// stop closes; then it commits what is left.
//
// At most inFlight groups are committed and not yet durable. When none
// is, the open group is committed at once, so what arrives during an
// fsync forms the next group (measured
// at 32 concurrent reserve+deletes: 1.3 transitions per group with no
// bound, about 16 with one group in flight). With --fsync always a group
// that reaches overlapAt transitions is committed beside the groups in
// flight, and its fsync runs beside theirs (see "overlapping syncs"
// below): on a slow disk a transition then waits for about one sync
// instead of the rest of another one first, while on a fast disk the
// sync in flight ends before that many arrive, and groups stay as large
// as with one in flight. With the fsync window a group is durable once
// written, and one in flight is enough.
//
// A group smaller than overlapAt waits for every group in flight, not
// only the oldest: committing it as soon as any one became durable made
// groups of one or two beside the others on a fast disk, each with its
// own fsync. Without that, at 32 concurrent reserve+deletes groups grew
// from 8.8 to 10-11 transitions and puts per sync by a sixth, and the
// slow-disk puts reached as much of their bound or more
// (BenchmarkPutSlowSync, 1 ms and 10 ms).
func (s *Store) committer() {
	defer s.bg.Done()
	limit := s.inFlight()
	var flight []*group // committed, oldest first, not seen durable yet
	for {
		var oldest chan struct{} // nil (never ready) when none is in flight
		if len(flight) > 0 {
			oldest = flight[0].done
		}
		select {
		case <-s.kick:
		case <-oldest:
		case <-s.stop:
			s.mu.Lock()
			s.flushLocked()
			s.mu.Unlock()
			return
		}
		for len(flight) > 0 && isClosed(flight[0].done) {
			flight = flight[1:]
		}
		s.mu.Lock()
		s.wakes++
		g := s.open
		now := g.ops > 0 && len(flight) < limit &&
			(len(flight) == 0 || g.ops >= overlapAt)
		if now {
			s.flushLocked()
			flight = append(flight, g)
		}
		s.kickAt = kickAt(len(flight), limit)
		s.mu.Unlock()
	}
}

// kickAt is how many transitions the open group must hold before a new
// one wakes the committer, given what the committer would do with it:
// with no group in flight any transition is committed at once; with
// some in flight only a group of overlapAt starts beside them; with
// limit in flight none. Until then the
// committer wakes only when its oldest group becomes durable, and finds
// the open group then.
//
// A kick the committer cannot act on costs a goroutine wake-up and a
// turn of the store mutex for nothing. Every transition kicked once,
// and at 32 concurrent reserve+deletes most arrived while the group in
// flight was still being written: a wasted wake-up per transition.
func kickAt(flying, limit int) int {
	switch {
	case flying == 0:
		return 1
	case flying < limit:
		return overlapAt
	default:
		return math.MaxInt
	}
}

// syncsInFlight is how many groups, and so WAL fdatasyncs, may be in
// flight at once with --fsync always.
const syncsInFlight = 4

// overlapAt is how many transitions a group gathers before its fsync
// starts beside one in flight: a sync then never carries fewer (each
// costs tens of microseconds of kernel CPU), and 32 connections on a slow
// disk form up to four such groups at once.
const overlapAt = 8

// inFlight is the committer's bound on groups committed and not durable.
func (s *Store) inFlight() int {
	if s.window() {
		return 1
	}
	return syncsInFlight
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Overlapping syncs (--fsync always).
//
// Pebble's log writer writes and syncs the WAL from one goroutine, so its
// syncs run one after another, and a transition that arrives while one
// runs waits for the rest of it and then for its own: about two syncs.
// With 32 connections each waiting for its answer, that halves what a
// slow disk allows. So the WAL's Sync only marks the data written
// (lazyWALFS, fsync.go: Pebble's SyncWait then returns once write(2)
// has), and the store makes the fdatasync itself: one round per group,
// started the moment the group's write is done, beside the rounds still
// running (at most syncsInFlight, bounded by the committer). A round
// syncs every open WAL file, so it covers every group written before it
// began, earlier groups included; groups are answered in commit order,
// each once a round that began after its write has ended.

// await waits for g's WAL write, then makes the sync round that covers
// it (with the fsync window, none: written is what the window answers).
// Each group has its own await, so a group's write and its sync never
// wait for an earlier group's sync.
func (s *Store) await(g *group) {
	defer s.bg.Done()
	err := g.b.SyncWait()
	if err == nil && s.unsynced.waiting(g.commit) {
		err = s.syncWAL() // the one durable-write path's sync (durable.go)
	}
	s.unsynced.finish(s, g.commit, err)
	// g is answered (by this finish or an earlier one). Only now, after
	// its SyncWait returned, may its batch serve another group: a round
	// for a later group can answer g first, and a batch reset while
	// Pebble still owes it a SyncWait hangs that wait.
	<-g.done
	if g.err == nil {
		s.recycle(g)
	}
}

// unsynced holds the groups written to the WAL and waiting for a sync
// round, oldest first.
type unsynced struct {
	pending atomic.Int64 // groups added and not answered yet
	// answer is held while groups are answered, so that they are in
	// commit order; finish may take the store mutex under it.
	answer sync.Mutex
	// mu guards gs. add takes it under the store mutex, so it is never
	// held while another lock is taken.
	mu sync.Mutex
	gs []*group
}

func (q *unsynced) add(g *group) {
	q.pending.Add(1)
	q.mu.Lock()
	q.gs = append(q.gs, g)
	q.mu.Unlock()
}

// waiting reports whether group commit hi is still unanswered: a round
// that began after a later group's write may have answered it already,
// and then it needs no sync of its own.
func (q *unsynced) waiting(hi uint64) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.gs) > 0 && q.gs[0].commit <= hi
}

// finish answers every group up to commit hi still waiting, oldest
// first: a sync round (or, with the window, a write) that covers group hi
// covers every earlier one, written before it.
func (q *unsynced) finish(s *Store, hi uint64, err error) {
	q.answer.Lock()
	defer q.answer.Unlock()
	q.mu.Lock()
	n := 0
	for n < len(q.gs) && q.gs[n].commit <= hi {
		n++
	}
	gs := q.gs[:n:n]
	q.gs = q.gs[n:]
	q.mu.Unlock()
	for i, g := range gs {
		s.finish(g, err)
		gs[i] = nil
		q.pending.Add(-1)
	}
}

// finish answers g's transitions: durable, or failed with g's own error
// or the sync's.
func (s *Store) finish(g *group, err error) {
	if g.err == nil && err != nil {
		s.mu.Lock()
		g.err = s.fail("sync", err)
		s.mu.Unlock()
	}
	if g.err == nil {
		s.markSynced(g) // before anyone is answered
		if !g.start.IsZero() {
			s.Committed(g.start)
		}
	}
	close(g.done)
}
