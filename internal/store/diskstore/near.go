package diskstore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/cockroachdb/pebble/v2"
)

// nearFuture keeps the near future of the delayed jobs in memory, so memory
// does not grow with the number of far-future jobs.
//
// The due index on disk (G keys) holds every delayed job in (due, seq)
// order. Memory holds a heap of the jobs whose G key is at or before the
// horizon, the last G key loaded; invariant: every delayed job with a key
// <= horizon is in the heap, every other one is on disk only. A put,
// release or update landing at or before the horizon joins the heap; a
// later one only updates next, the first G key past the horizon. When the
// heap runs dry, load reads the next chunk from the horizon on: the scan
// starts from that in-memory cursor and never from the start of the index,
// where Tick's deletes leave tombstones Pebble would have to skip (5 ms
// against 19 µs measured). If puts overfill the heap, trim moves the
// horizon back and leaves the latest entries to disk.
//
// Jobs due within nearWindow of the store's clock stay in the heap, with
// their records when the hot budget allows, up to maxNear of them: a put
// due that soon moves the horizon forward when nothing on disk lies
// between (place), and trim keeps them. Without that, a burst of jobs due
// at one instant went to disk past the first chunks, and the timer read
// each record back from Pebble when it came due: 35% of the server's CPU
// while 200,000 such jobs drained. Jobs due later than the window are
// what the chunks bound, so memory still does not grow with the far
// future.
type nearFuture struct {
	q         queue  // delayed jobs with G key <= horizon, by (due, seq)
	horizon   []byte // last G key loaded; nil before anything was loaded
	next      []byte // first G key past the horizon, when nextKnown; nil: none
	nextKnown bool
	kept      int // entries trim kept last time: the heap may double before the next trim
	peak      int // most entries the heap has held (for tests)
}

// nearWindow is how far ahead of the store's clock delayed jobs stay in
// memory whatever the chunks; maxNear bounds how many do (about 40 MiB of
// entries, records apart, which the hot budget bounds).
const (
	nearWindow = 60_000 // ms
	maxNear    = 1 << 18
)

// place reports whether a delayed job with G key k belongs in the heap,
// now being the store's clock in ms; if not, it notes k as a candidate for
// next.
func (n *nearFuture) place(k []byte, now int64) bool {
	if n.horizon != nil && bytes.Compare(k, n.horizon) <= 0 {
		return true
	}
	if n.nextKnown && (n.next == nil || bytes.Compare(k, n.next) < 0) {
		if now > 0 && dueOf(k) <= now+nearWindow && n.q.Len() < maxNear {
			// Nothing on disk lies between the horizon and k, so moving
			// the horizon to k keeps the invariant.
			n.horizon = bytes.Clone(k)
			return true
		}
		n.next = k
	}
	return false
}

// forget notes that the disk-only delayed job with G key k is gone.
func (n *nearFuture) forget(k []byte) {
	if n.nextKnown && bytes.Equal(k, n.next) {
		n.next, n.nextKnown = nil, false
	}
}

// dueOf is the due time in ms of a G key.
func dueOf(k []byte) int64 { return int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63)) }

// scanFrom opens an iterator over the G keys past the horizon.
func (n *nearFuture) scanFrom(s *Store) (*pebble.Iterator, error) {
	lower := []byte{prefixDue}
	if n.horizon != nil {
		lower = append(bytes.Clone(n.horizon), 0)
	}
	return s.iter(&pebble.IterOptions{LowerBound: lower, UpperBound: []byte{prefixDue + 1}})
}

// load brings the next chunk of the due index into the heap. Requires mu.
func (n *nearFuture) load(s *Store) error {
	it, err := n.scanFrom(s)
	if err != nil {
		return unavailable("load due index", err)
	}
	loaded := 0
	n.next, n.nextKnown = nil, true
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) != 17 {
			_ = it.Close()
			return unavailable("load due index", fmt.Errorf("%w: due key %x", errCorrupt, k))
		}
		if loaded == s.chunk {
			n.next = bytes.Clone(k)
			break
		}
		due := dueOf(k)
		e := &entry{seq: binary.BigEndian.Uint64(k[9:]), id: string(it.Value()), state: stDelayed, at: due, due: due}
		s.reinsert(e)
		n.horizon = bytes.Clone(k)
		loaded++
	}
	if err := it.Close(); err != nil {
		n.nextKnown = false
		return unavailable("load due index", err)
	}
	n.peak = max(n.peak, n.q.Len())
	return nil
}

// nextDue returns the due time of the first delayed job on disk only,
// seeking from the horizon if it is not known. Requires mu.
func (n *nearFuture) nextDue(s *Store) (int64, bool, error) {
	if !n.nextKnown {
		it, err := n.scanFrom(s)
		if err != nil {
			return 0, false, unavailable("scan due index", err)
		}
		n.next = nil
		if it.First() {
			n.next = bytes.Clone(it.Key())
		}
		if err := it.Close(); err != nil {
			return 0, false, unavailable("scan due index", err)
		}
		n.nextKnown = true
	}
	if n.next == nil {
		return 0, false, nil
	}
	return dueOf(n.next), true, nil
}

// trim keeps the heap within two chunks beyond the jobs due within
// nearWindow: when puts overfilled it, the earliest chunk (and any later
// entries due within the window, up to maxNear) stays, the horizon moves
// back to the last entry kept and the rest is left to the disk. It sorts
// the heap only once it has doubled since the last trim, so its cost per
// transition stays constant. Requires mu.
func (n *nearFuture) trim(s *Store) {
	n.peak = max(n.peak, n.q.Len())
	n.kept = min(n.kept, n.q.Len()) // the timer drained it meanwhile
	if n.q.Len() <= 2*max(s.chunk, n.kept) {
		return
	}
	es := slices.Clone(n.q.es)
	slices.SortFunc(es, func(a, b *entry) int {
		if byAt(a, b) {
			return -1
		}
		return 1
	})
	keep := s.chunk
	if now := s.clock.Last().UnixMilli(); now > 0 {
		for keep < len(es) && keep < maxNear && es[keep].at <= now+nearWindow {
			keep++
		}
	}
	n.kept = keep
	if keep == len(es) {
		return
	}
	for _, e := range es[keep:] {
		s.drop(e)
	}
	last, first := es[keep-1], es[keep]
	n.horizon = dueKeyOf(last.at, last.seq)
	n.next, n.nextKnown = dueKeyOf(first.at, first.seq), true
}
