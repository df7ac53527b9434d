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
type nearFuture struct {
	q         queue  // delayed jobs with G key <= horizon, by (due, seq)
	horizon   []byte // last G key loaded; nil before anything was loaded
	next      []byte // first G key past the horizon, when nextKnown; nil: none
	nextKnown bool
	peak      int // most entries the heap has held (for tests)
}

// place reports whether a delayed job with G key k belongs in the heap; if
// not, it notes k as a candidate for next.
func (n *nearFuture) place(k []byte) bool {
	if n.horizon != nil && bytes.Compare(k, n.horizon) <= 0 {
		return true
	}
	if n.nextKnown && (n.next == nil || bytes.Compare(k, n.next) < 0) {
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

// trim keeps the heap within two chunks: when puts overfilled it, the
// earliest chunk stays, the horizon moves back to its last entry and the
// rest is left to the disk. Requires mu.
func (n *nearFuture) trim(s *Store) {
	n.peak = max(n.peak, n.q.Len())
	if n.q.Len() <= 2*s.chunk {
		return
	}
	es := slices.Clone(n.q.es)
	slices.SortFunc(es, func(a, b *entry) int {
		if byAt(a, b) {
			return -1
		}
		return 1
	})
	for _, e := range es[s.chunk:] {
		s.drop(e)
	}
	last, first := es[s.chunk-1], es[s.chunk]
	n.horizon = dueKeyOf(last.at, last.seq)
	n.next, n.nextKnown = dueKeyOf(first.at, first.seq), true
}
