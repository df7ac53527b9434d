package diskstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Reservation overlays (format version 4).
//
// A reserve changes a few fields of a job: its state, its attempts and
// reservation token, its deadline, and one new attempt in its history.
// Writing the whole record again for that (the body included) was about
// three fifths of the bytes a reserve put into the WAL and the memtable
// and one of its three Pebble keys; the memtable filled faster and
// flushed more often, and the flushes are the CPU bursts behind the lateness
// tail (docs/benchmarks.md). So a reserve leaves the job's record as it
// found it and writes what it changed into the value of the reserved X
// key it writes anyway:
//
//	due (8 bytes) + id + 0x00 + attempts (uvarint) + deadline (time)
//	  + reserved (time) + by (string) + CRC-32C of all before it (4 bytes)
//
// (times and strings as in record.go). The job is then its record with
// the overlay applied (applyOverlay), exactly as the reserve built it.
// Every later transition of the job writes its whole record again, and
// either no X key of the reserved state or one without an overlay (a
// touch), so an overlay only ever sits over the record of the job as the
// reserve found it; applyOverlay checks that (the attempt count) rather
// than trust it. Ids never hold a 0x00 byte (delayq.ValidID), so a value
// says by itself whether it carries an overlay, and a reserved X value
// written by format version 3 (due + id) reads as the plain index value
// it is.

// The timer's promotion of a delayed job to ready changes its state
// alone (store.ApplyDue), so it writes no record either: the job's ready
// X key over a record in the delayed state is a ready job (promoted).
// Every other transition out of ready writes the whole record. A repair,
// which rebuilds the indexes from the records, brings such a job back
// delayed with its due time past, and the timer promotes it again at
// once.

// promoted makes rec, read from the record of a job memory or its X key
// holds as ready, the ready job it is.
func promoted(rec *delayq.Job) {
	if rec.State == delayq.StateDelayed {
		rec.State = delayq.StateReady
	}
}

// overlayMark separates an X value's id from its overlay.
const overlayMark = 0x00

// appendOverlayValue appends the reserved X value of n, which a reserve
// built from the job its record holds: due, id and n's overlay.
func appendOverlayValue(dst []byte, n *delayq.Job) []byte {
	start := len(dst)
	dst = appendIndexValue(dst, n)
	a := n.History[len(n.History)-1]
	dst = append(dst, overlayMark)
	dst = binary.AppendUvarint(dst, uint64(n.Attempts))
	dst = appendTime(dst, n.Deadline)
	dst = appendTime(dst, a.Reserved)
	dst = appendString(dst, a.By)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// splitIndexValue splits an X value into its due (ms), its id and its
// overlay (nil when it has none; the whole value otherwise, which
// applyOverlay checks).
func splitIndexValue(v []byte) (due int64, id []byte, overlay []byte, err error) {
	if len(v) <= 8 {
		return 0, nil, nil, fmt.Errorf("%w: index value %x", errCorrupt, v)
	}
	due, id = int64(binary.BigEndian.Uint64(v)), v[8:]
	if i := bytes.IndexByte(id, overlayMark); i >= 0 {
		id, overlay = id[:i], v
	}
	if len(id) == 0 {
		return 0, nil, nil, fmt.Errorf("%w: index value %x", errCorrupt, v)
	}
	return due, id, overlay, nil
}

// applyOverlay returns the reserved job that base (the record) and v (a
// reserved X value with an overlay, as splitIndexValue returns it) make
// together. base is not changed.
func applyOverlay(base *delayq.Job, v []byte) (*delayq.Job, error) {
	mark := -1
	if len(v) >= 8+4 {
		mark = bytes.IndexByte(v[8:len(v)-4], overlayMark)
	}
	if mark < 0 {
		return nil, fmt.Errorf("%w: overlay of job %q: no overlay in %x", errCorrupt, base.ID, v)
	}
	body, sum := v[:len(v)-4], binary.BigEndian.Uint32(v[len(v)-4:])
	if got := crc32.Checksum(body, castagnoli); got != sum {
		return nil, fmt.Errorf("%w: overlay of job %q: stored %08x, computed %08x", errChecksum, base.ID, sum, got)
	}
	d := decoder{b: body[8+mark+1:]}
	attempts := d.count()
	deadline := d.time()
	reserved := d.time()
	by := d.string()
	switch {
	case d.err == nil && len(d.b) != 0:
		d.err = errors.New("trailing bytes")
	case d.err == nil && string(v[8:8+mark]) != base.ID:
		d.err = fmt.Errorf("the overlay names job %q", v[8:8+mark])
	case d.err == nil && (base.State == delayq.StateReserved || base.State.Retained() || attempts != base.Attempts+1):
		// The record is not the one this reserve started from.
		d.err = fmt.Errorf("record in state %s with %d attempts under a reservation of attempt %d", base.State, base.Attempts, attempts)
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: overlay of job %q: %v", errCorrupt, base.ID, d.err)
	}
	n := successor(base)
	store.ApplyReserve(n, deadline.Add(-n.TTR))
	n.Deadline = deadline // exact, whatever TTR's rounding
	startAttempt(n, reserved, by)
	return n, nil
}

// overlaid reports whether a reserve made n from old alone, so that n can
// be written as old's record plus an overlay: old's record is whole (it
// is not reserved, so it carries no overlay itself) and n differs from
// old only in what ApplyReserve and one new attempt change.
func overlaid(old, n *delayq.Job) bool {
	if old == nil || n == nil || n.State != delayq.StateReserved || old.State == delayq.StateReserved ||
		old.State.Retained() || len(n.History) == 0 || n.Attempts != old.Attempts+1 {
		return false
	}
	a := n.History[len(n.History)-1]
	return a.N == n.Attempts && a.Outcome == "" && a.Ended.IsZero() && a.Reason == ""
}

// reservedIndexKey is the X key of the reserved entry e.
func reservedIndexKey(e *entry) []byte {
	k := appendStateIndexPrefix(make([]byte, 0, len(e.topic)+3+16), e.topic, stReserved)
	k = binary.BigEndian.AppendUint64(k, sortable(e.at))
	return binary.BigEndian.AppendUint64(k, e.seq)
}

// overlayed returns the job rec (read from its record) is once the
// overlay of its reserved X key, if any, is applied. Requires mu.
func (s *Store) overlayed(e *entry, rec *delayq.Job) (*delayq.Job, error) {
	if e.state != stReserved {
		return rec, nil
	}
	v, ok, err := s.get(reservedIndexKey(e))
	if err != nil {
		return nil, unavailable("get reservation of "+e.id, err)
	}
	if !ok {
		return nil, unavailable("read job", fmt.Errorf("%w: job %q #%d reserved but not indexed", errCorrupt, e.id, e.seq))
	}
	_, _, ov, err := splitIndexValue(v)
	if err != nil || ov == nil {
		return rec, err
	}
	return applyOverlay(rec, ov)
}
