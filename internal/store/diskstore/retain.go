package diskstore

import (
	"bytes"
	"fmt"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Retained jobs (Options.Retention, the store contract's "Retention").
//
// A job deleted while the retention is on is not removed: its record
// stays under its J key, rewritten in a retained state (finished,
// deleted, failed) with its Ended time, and its S key stays, so Get by
// id and by seq and Put's id check find it as they find a live job. Two
// keys join it: an X key of its retained state (sorted by Ended then
// seq), which List pages through, and an E key (Ended, seq), the expiry
// index. A retained job is in no in-memory structure and in no topic's
// counters: it costs memory nothing, and Topics does not count it.
//
// Tick removes the jobs whose retention ran out (Ended + For at or
// before its now) from the front of the E keys: an E value names the
// job's state, topic and id, so the removal reads no record and writes
// four deletions (J, S, X, E). The scan starts from an in-memory cursor
// past what it removed, so it does not step over the tombstones its own
// deletes left (as the due index's chunks do, near.go), and memory
// keeps the earliest Ended left, so a Tick with nothing expiring reads
// nothing from Pebble. Until Tick removes it, an expired job is
// invisible: Get, List and Put compare Ended + For with the
// retention's clock (Retention.Now), and a put of its id removes it in
// the same batch.
//
// Ended comes from the store's clock (store.Clock, never going back),
// and Tick removes only jobs that ended at least For before its own
// now, so every job retained later sorts after the cursor.

// expiry is what memory knows of the E keys. Guarded by mu.
type expiry struct {
	cursor []byte // E keys before it were removed by this process; nil: start of the index
	known  bool   // first is the earliest Ended of the E keys (if any) at or after cursor
	any    bool   // with known: there is such a key
	first  int64  // with any: its Ended, ms
}

// note records that a job ended at ms was retained.
func (x *expiry) note(ms int64) {
	if x.known && (!x.any || ms < x.first) {
		x.any, x.first = true, ms
	}
}

// retaining reports whether deletes keep jobs.
func (s *Store) retaining() bool { return s.opts.Retention.For > 0 }

// visible reports whether a retained job is still within its retention
// by the retention's clock.
func (s *Store) visible(j *delayq.Job) bool {
	return j.Ended.Add(s.opts.Retention.For).After(s.opts.Retention.Clock()())
}

// ended is the version of live job j that a delete at now leaves: its
// attempt in progress ended as finished (a delete under its reservation)
// or deleted (a forced delete of a reserved job). It reports whether the
// delete finished the job.
func ended(j *delayq.Job, p store.DeleteParams, now time.Time) (*delayq.Job, bool) {
	n := successor(j)
	finished := j.State == delayq.StateReserved && p.Ref.Reservation != "" && p.Ref.Reservation == j.Reservation
	switch {
	case finished:
		endAttempt(n, now, delayq.OutcomeFinished, "")
	case j.State == delayq.StateReserved:
		endAttempt(n, now, delayq.OutcomeDeleted, "")
	}
	return n, finished
}

// retained is the retained job a delete at now makes of n (the job as
// ended returned it).
func (s *Store) retained(n *delayq.Job, finished bool, now time.Time) *delayq.Job {
	r := successor(n)
	r.State = delayq.EndedState(n.State, finished)
	r.Ended = now
	r.Reservation, r.Deadline = "", time.Time{}
	if !s.opts.Retention.Bodies || s.diskShort() {
		r.Body = nil
	}
	return r
}

// diskShort reports whether the disk is short of room: below the floor,
// or with the ballast released. Then retained jobs keep no body, so the
// finishes and deletes that drain a full disk write a record of a few
// hundred bytes, not the body again. Requires mu.
func (s *Store) diskShort() bool {
	if s.ballast.missing() {
		return true
	}
	if s.space.floor == 0 {
		return false
	}
	s.refreshSpace(time.Now())
	return s.space.err == nil && s.space.bytes < s.space.floor
}

// remove stages the delete of live job j as p asks, at now: gone, or
// kept as a retained job. It returns the job as the delete found it,
// its attempt ended. Requires mu.
func (s *Store) remove(t *txn, j *delayq.Job, p store.DeleteParams, now time.Time) *delayq.Job {
	n, finished := ended(j, p, now)
	if !s.retaining() {
		t.stage(j, nil)
		return n
	}
	t.stage(j, s.retained(n, finished, now))
	return n
}

// deleteNow is when a delete acts: p.Now through the store's clock; a
// caller that gives no Now gets the wall clock, so a retained job never
// has a zero Ended. Requires mu.
func (s *Store) deleteNow(p store.DeleteParams) time.Time {
	if p.Now.IsZero() && s.retaining() {
		return s.clock.At(time.Now())
	}
	return s.clock.At(p.Now)
}

// expire stages the removal of up to limit retained jobs whose retention
// ran out at now, in expiry order, and counts them in res. It leaves
// t.exp with what memory will know of the E keys once t applies.
// Requires mu.
func (s *Store) expire(t *txn, now time.Time, limit int, res *store.TickResult) error {
	x := s.exp
	forMS := s.opts.Retention.For.Milliseconds()
	nowMS := now.UnixMilli()
	if x.known && (!x.any || x.first+forMS > nowMS) {
		return nil
	}
	lower := x.cursor
	if lower == nil {
		lower = []byte{prefixExpiry}
	}
	it, err := s.iter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixExpiry + 1}})
	if err != nil {
		return unavailable("expire", err)
	}
	defer it.Close()
	x.known, x.any = true, false
	for ok := it.First(); ok; ok = it.Next() {
		j, err := decodeExpiry(it.Key(), it.Value())
		if err != nil {
			// Like skipCorrupt: a damaged entry must not stop the timer
			// at every Tick. It stays on disk for `delayq repair`, which
			// rebuilds the index from the records.
			s.log.Error("diskstore: skipping a damaged expiry index entry; stop the server and run `delayq repair` to rebuild the index",
				"key", fmt.Sprintf("%x", it.Key()), "err", err)
			x.cursor = append(bytes.Clone(it.Key()), 0)
			continue
		}
		ms := j.Ended.UnixMilli()
		if ms+forMS > nowMS || res.Expired == limit {
			x.any, x.first = true, ms
			break
		}
		t.stage(j, nil)
		res.Expired++
		x.cursor = append(bytes.Clone(it.Key()), 0)
	}
	if err := it.Error(); err != nil {
		return unavailable("expire", err)
	}
	if res.Expired == 0 {
		s.exp = x // what it read holds whatever becomes of t
	} else {
		t.exp = &x // the cursor moves past the removals once they apply
	}
	return nil
}

// nextExpiry is when the earliest retained job left expires, if memory
// knows. Requires mu.
func (s *Store) nextExpiry() (time.Time, bool) {
	if !s.exp.known || !s.exp.any {
		return time.Time{}, false
	}
	return time.UnixMilli(s.exp.first).Add(s.opts.Retention.For), true
}

// takeOver stages the removal of the retained jobs whose ids a put takes
// because their retention ran out. Requires mu.
func (t *txn) takeOver(expired []*delayq.Job) {
	for _, j := range expired {
		t.stage(j, nil)
	}
}

// startAttempt and endAttempt are Job.StartAttempt and Job.EndAttempt
// on a successor: they give it a History of its own first, because
// successor shares the old record's, which must not change (an aborted
// transition leaves the old record in memory as it was).
func startAttempt(n *delayq.Job, now time.Time, by string) {
	n.History = slices.Clip(n.History)
	n.StartAttempt(now, by)
}

func endAttempt(n *delayq.Job, now time.Time, how delayq.Outcome, reason string) {
	n.History = slices.Clone(n.History)
	n.EndAttempt(now, how, reason)
}
