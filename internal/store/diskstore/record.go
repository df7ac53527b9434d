package diskstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/delayq/delayq"
)

// recordVersion is the first byte of a job record of the first layout,
// and recordVersion2 of one that carries attempts or a retained job's
// end (format version 3, see keys.go). A job with neither is still
// written in the first layout, byte for byte as before, so a store of
// format version 2 reads as it is and a job that never ran costs no byte
// more.
const (
	recordVersion  byte = 1
	recordVersion2 byte = 2
)

// The outcome bytes of an attempt in a record of version 2; 0 is an
// attempt in progress.
var outcomeBytes = []delayq.Outcome{"", delayq.OutcomeFinished, delayq.OutcomeReleased, delayq.OutcomeTTRExpired,
	delayq.OutcomeBuried, delayq.OutcomeGaveBack, delayq.OutcomeDeleted}

func outcomeByte(o delayq.Outcome) byte {
	for i, x := range outcomeBytes {
		if x == o {
			return byte(i)
		}
	}
	return 0xff // not an outcome: decodeRecord refuses it
}

// plainRecord reports whether j is written in the first layout.
func plainRecord(j *delayq.Job) bool {
	return len(j.History) == 0 && j.Ended.IsZero() && j.State.Valid()
}

// errCorrupt is returned for bytes that are not a record of this version.
var errCorrupt = errors.New("diskstore: corrupt record")

// encodeRecord appends j's record to dst. Layout (version 1): the version
// byte, then seq, topic, id, body, priority, ttr ms, max attempts, attempts,
// state byte, due, created, delay ms, reservation, deadline, timeouts,
// releases, buries, kicks. Strings and the body are a uvarint length then
// the bytes; counts are uvarints; durations are varint milliseconds; times
// are a uvarint that is 0 for the zero time and otherwise 1 + the zigzag of
// the Unix milliseconds.
//
// A job that has failed (LastReason or LastFailed set) carries an optional
// trailer after kicks: last reason, last failed. It is optional rather than
// a new version so that records written before it decode unchanged and a
// job that never failed costs no byte more; a trailer of two zero values is
// refused as non-canonical, so every job has exactly one encoding.
//
// Version 2 (a job with attempts, an Ended time or a retained state) is
// the version byte 2, the same fields up to kicks (the state byte may be
// a retained one), then always: last reason, last failed, ended, the
// number of attempts (at most delayq.MaxHistory), and each attempt: n,
// reserved, by, ended, outcome byte (outcomeBytes), reason. A job that
// needs none of these is refused in version 2, so that each job still
// has exactly one encoding.
func encodeRecord(dst []byte, j *delayq.Job) []byte {
	plain := plainRecord(j)
	if plain {
		dst = append(dst, recordVersion)
	} else {
		dst = append(dst, recordVersion2)
	}
	dst = binary.AppendUvarint(dst, j.Seq)
	dst = appendString(dst, j.Topic)
	dst = appendString(dst, j.ID)
	dst = appendBytes(dst, j.Body) // not string(j.Body): that conversion copied every body once more
	dst = binary.AppendUvarint(dst, uint64(j.Priority))
	dst = binary.AppendVarint(dst, j.TTR.Milliseconds())
	dst = binary.AppendUvarint(dst, uint64(j.MaxAttempts))
	dst = binary.AppendUvarint(dst, uint64(j.Attempts))
	dst = append(dst, stateByte(j.State))
	dst = appendTime(dst, j.Due)
	dst = appendTime(dst, j.Created)
	dst = binary.AppendVarint(dst, j.Delay.Milliseconds())
	dst = appendString(dst, j.Reservation)
	dst = appendTime(dst, j.Deadline)
	dst = binary.AppendUvarint(dst, uint64(j.Timeouts))
	dst = binary.AppendUvarint(dst, uint64(j.Releases))
	dst = binary.AppendUvarint(dst, uint64(j.Buries))
	dst = binary.AppendUvarint(dst, uint64(j.Kicks))
	if !plain {
		dst = appendString(dst, j.LastReason)
		dst = appendTime(dst, j.LastFailed)
		dst = appendTime(dst, j.Ended)
		dst = binary.AppendUvarint(dst, uint64(len(j.History)))
		for _, a := range j.History {
			dst = binary.AppendUvarint(dst, uint64(a.N))
			dst = appendTime(dst, a.Reserved)
			dst = appendString(dst, a.By)
			dst = appendTime(dst, a.Ended)
			dst = append(dst, outcomeByte(a.Outcome))
			dst = appendString(dst, a.Reason)
		}
		return dst
	}
	if j.LastReason != "" || !j.LastFailed.IsZero() {
		dst = appendString(dst, j.LastReason)
		dst = appendTime(dst, j.LastFailed)
	}
	return dst
}

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// appendBytes encodes b exactly as appendString encodes string(b).
func appendBytes(dst, b []byte) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(b)))
	return append(dst, b...)
}

func appendTime(dst []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(dst, 0)
	}
	ms := t.UnixMilli()
	return binary.AppendUvarint(dst, uint64(ms<<1^(ms>>63))+1)
}

// decodeRecord parses a record. It copies what it keeps, so b may be
// reused, and it rejects anything encodeRecord cannot produce (negative
// counts, durations that overflow, unknown states, trailing bytes).
func decodeRecord(b []byte) (*delayq.Job, error) {
	if len(b) == 0 || (b[0] != recordVersion && b[0] != recordVersion2) {
		return nil, fmt.Errorf("%w: unknown record version", errCorrupt)
	}
	v2 := b[0] == recordVersion2
	d := decoder{b: b[1:]}
	j := &delayq.Job{Seq: d.uvarint()}
	j.Topic = d.string()
	j.ID = d.string()
	if body := d.string(); body != "" {
		j.Body = []byte(body)
	}
	j.Priority = uint32(d.bounded(math.MaxUint32))
	j.TTR = d.duration()
	j.MaxAttempts = d.count()
	j.Attempts = d.count()
	j.State = stateOf(d.byte())
	j.Due = d.time()
	j.Created = d.time()
	j.Delay = d.duration()
	j.Reservation = d.string()
	j.Deadline = d.time()
	j.Timeouts, j.Releases, j.Buries, j.Kicks = d.count(), d.count(), d.count(), d.count()
	if v2 {
		d.history(j)
	} else if d.err == nil && len(d.b) != 0 {
		j.LastReason = d.string()
		j.LastFailed = d.time()
		if d.err == nil && j.LastReason == "" && j.LastFailed.IsZero() {
			d.fail("empty failure trailer")
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = errors.New("trailing bytes")
	}
	if d.err == nil && j.State == "" {
		d.err = errors.New("unknown state")
	}
	if d.err == nil && plainRecord(j) == v2 {
		d.err = errors.New("record version does not match its fields")
	}
	if d.err != nil {
		return nil, fmt.Errorf("%w: %v", errCorrupt, d.err)
	}
	return j, nil
}

// history reads the tail of a record of version 2: the failure, the
// end, the attempts.
func (d *decoder) history(j *delayq.Job) {
	j.LastReason = d.string()
	j.LastFailed = d.time()
	j.Ended = d.time()
	n := d.bounded(delayq.MaxHistory)
	for range n {
		a := delayq.Attempt{N: d.count(), Reserved: d.time(), By: d.string(), Ended: d.time()}
		if o := d.byte(); int(o) < len(outcomeBytes) {
			a.Outcome = outcomeBytes[o]
		} else {
			d.fail("unknown outcome")
		}
		a.Reason = d.string()
		if d.err != nil {
			return
		}
		j.History = append(j.History, a)
	}
}

// decoder reads fields in order; the first error sticks and later reads
// return zero values.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(msg string) {
	if d.err == nil {
		d.err = errors.New(msg)
	}
	d.b = nil
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad uvarint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bounded(max uint64) uint64 {
	v := d.uvarint()
	if v > max {
		d.fail("value out of range")
		return 0
	}
	return v
}

func (d *decoder) count() int { return int(d.bounded(math.MaxInt64)) }

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail("short record")
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("short record")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// maxMS bounds millisecond durations so that they convert without
// overflow.
const maxMS = math.MaxInt64 / int64(time.Millisecond)

func (d *decoder) duration() time.Duration {
	ms := d.varint()
	if ms > maxMS || ms < -maxMS {
		d.fail("duration out of range")
		return 0
	}
	return time.Duration(ms) * time.Millisecond
}

func (d *decoder) time() time.Time {
	v := d.uvarint()
	if v == 0 {
		return time.Time{}
	}
	v--
	ms := int64(v>>1) ^ -int64(v&1)
	t := time.UnixMilli(ms)
	if t.IsZero() {
		d.fail("non-canonical zero time")
		return time.Time{}
	}
	return t
}
