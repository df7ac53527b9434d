package diskstore

import (
	"context"
	"sync"
	"time"
)

// Giving back the disk of expired retained jobs (issue 28, item 12).
//
// Tick's expiry (retain.go) deletes an expired job's keys, but a delete
// is a tombstone: the record it hides, and every older version of it
// (the put with its body, the retained copy), keeps its bytes in the
// memtable, the WAL and the sstables until a flush writes the
// tombstones out and a compaction drops what they cover. Pebble starts
// neither for deletes alone: a store whose retained jobs all expired
// held 661 MiB for minutes (3,000 jobs of 60 KB, --retain 20s).
//
// So once the expiry of enough jobs has been committed, a goroutine of
// the store's own (never a request) flushes the memtable and compacts
// the job records' key range (the J keys: ids are random, so the
// expired records are spread over all of it). Rate-limited: at most one
// such reclaim in flight, at most one every reclaimEvery, and only
// after reclaimAfter expired jobs since the last one, and at least a
// quarter as many as the store holds live. A compaction of the J range
// rewrites the live records too, so its cost grows with the store: the
// relative bound makes each reclaim free at least a fifth of what it
// rewrites, so a store of millions of far-future jobs is not rewritten
// every minute for the thousand retained jobs that expired beside it.

const (
	// defaultReclaimAfter is how many retained jobs Tick must have
	// removed since the last reclaim before the next.
	defaultReclaimAfter = 1024
	// defaultReclaimEvery is the least time between two reclaims.
	defaultReclaimEvery = time.Minute
)

// reclaimer counts the expired jobs and runs the reclaims.
type reclaimer struct {
	mu      sync.Mutex
	pending int       // jobs expired since the last reclaim began
	running bool      // a reclaim is in flight
	last    time.Time // when the last reclaim began
}

// noteExpired counts n jobs whose removal group g holds, and starts a
// reclaim if the limits allow. It never blocks.
func (s *Store) noteExpired(g *group, n int) {
	after, every := s.opts.reclaimAfter, s.opts.reclaimEvery
	if after == 0 {
		after = defaultReclaimAfter
	}
	if every == 0 {
		every = defaultReclaimEvery
	}
	r := &s.reclaim
	r.mu.Lock()
	r.pending += n
	now := time.Now()
	if after < 0 || r.running || r.pending < after || (!r.last.IsZero() && now.Sub(r.last) < every) {
		r.mu.Unlock()
		return
	}
	pending := r.pending
	r.mu.Unlock()
	// Rare (at most once per reclaimAfter expiries and reclaimEvery), so
	// the walk over the topics' counters costs nothing that matters.
	if live := s.liveJobs(); pending < live/4 {
		return
	}
	r.mu.Lock()
	if r.running {
		r.mu.Unlock()
		return
	}
	r.running, r.pending, r.last = true, 0, now
	r.mu.Unlock()
	go s.runReclaim(g)
}

// liveJobs is how many live jobs the store holds, from the topics'
// counters.
func (s *Store) liveJobs() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, t := range s.topics {
		n += t.delayed + t.ready + t.reserved + t.buried
	}
	return n
}

// runReclaim waits for the removals in g to reach Pebble, then flushes
// and compacts the J range. It gives up quietly if the store closes;
// Close waits for a compaction already running (outside).
func (s *Store) runReclaim(g *group) {
	defer func() {
		s.reclaim.mu.Lock()
		s.reclaim.running = false
		s.reclaim.mu.Unlock()
	}()
	select {
	case <-g.done:
		if g.err != nil {
			return
		}
	case <-s.stop:
		return
	}
	err := s.outside(context.Background(), false, func() error {
		if err := s.db.Flush(); err != nil {
			return err
		}
		return s.db.Compact(context.Background(), []byte{prefixJob}, []byte{prefixJob + 1}, false)
	})
	if err != nil {
		s.log.Warn("diskstore: reclaiming the disk of expired retained jobs failed; it is retried after more expire", "err", err)
	}
}
