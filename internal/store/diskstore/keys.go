package diskstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/delayq/delayq"
)

// formatVersion is the version of the on-disk layout (the keys below and the
// record codec in record.go). Open writes it under metaVersionKey when it
// creates a store and refuses to open a store written with another version.
//
// To change the format:
//  1. Bump formatVersion and describe the change here, one line per version.
//  2. Keep the old decoders, and teach Open to migrate a store of version
//     formatVersion-1 in one Pebble batch (rewrite the changed keys, then set
//     metaVersionKey), or refuse it with a message naming the release that
//     can still read it. Never reinterpret old bytes silently.
//  3. Add a testdata store of the old version and a test that opens it.
//
// Versions:
//
//	1: first format.
//	2: every job record (J) sealed with a CRC-32C of its bytes (checksum.go);
//	   Open migrates a version 1 store (migrate.go).
//	3: job history and retained jobs (retain.go): a record may be of
//	   record version 2 (attempts, Ended, the retained states), and the
//	   retained jobs' E keys and X keys of the retained states. Every
//	   version 2 key and record reads as it is, so Open upgrades a
//	   version 2 store by writing the version alone (upgrade); the
//	   number keeps an older build from opening a store it cannot read.
//	4: a reserve writes no record: what it changed goes into the value of
//	   the job's reserved X key (a reservation overlay, overlay.go); nor
//	   does the timer's promotion of a delayed job (a ready X key over a
//	   delayed record is a ready job).
//	   Every version 3 key and record reads as it is, so Open upgrades a
//	   version 2 or 3 store by writing the version alone (upgrade).
const formatVersion uint32 = 4

// Key space. Every key starts with a one-byte prefix naming its kind:
//
//	J<id>                          -> job record (record.go)
//	S<seq>                         -> id
//	X<topic>\x00<state><sort key>  -> due ms (8 bytes) + id: a topic's jobs of one state in serving order
//	                                  (retained states: by Ended then seq, List's order); a reserved
//	                                  job's may add 0x00 + its reservation overlay (overlay.go)
//	G<due><seq>                    -> id: every delayed job, in due order (the timer's index)
//	E<ended><seq>                  -> state byte + topic length (uvarint) + topic + id: every
//	                                  retained job, in the order it expires (Tick's expiry index)
//	C<topic>                       -> topic counters and pause (topicStats codec)
//	M<name>                        -> meta values (format version, last seq)
//	P<kind>\x00<name>               -> a document: rev (8 bytes) + data (schedules, policies, alarms; docs.go)
//	Z<step><epoch><topic>\x00<start> -> a chart series bucket (series.go; new keys only, no format change)
//
// Integers are big-endian so that byte order is numeric order; times are
// milliseconds since the Unix epoch with the sign bit flipped so that
// negative times sort first.
const (
	prefixJob     = 'J'
	prefixSeq     = 'S'
	prefixIndex   = 'X'
	prefixDue     = 'G'
	prefixCounter = 'C'
	prefixMeta    = 'M'
	prefixDoc     = 'P'
	prefixSeries  = 'Z'
	prefixExpiry  = 'E'
)

// State bytes inside X keys and records.
const (
	stReady    byte = 'r'
	stDelayed  byte = 'd'
	stReserved byte = 'v'
	stBuried   byte = 'b'

	// The retained states (retain.go): in records of record version 2
	// and in the X keys of retained jobs only.
	stFinished byte = 'f'
	stDeleted  byte = 'x'
	stFailed   byte = 'F'
)

var (
	metaVersionKey = []byte("Mversion")
	metaSeqKey     = []byte("Mseq")
)

// listOrder is the order List walks the states when none is given.
var listOrder = []byte{stReady, stDelayed, stReserved, stBuried}

// cursorOrder ranks every state a List cursor may name: the live ones
// in listOrder, then the retained ones (listed one state at a time).
var cursorOrder = []byte{stReady, stDelayed, stReserved, stBuried, stFinished, stDeleted, stFailed}

func stateByte(s delayq.State) byte {
	switch s {
	case delayq.StateReady:
		return stReady
	case delayq.StateDelayed:
		return stDelayed
	case delayq.StateReserved:
		return stReserved
	case delayq.StateBuried:
		return stBuried
	case delayq.StateFinished:
		return stFinished
	case delayq.StateDeleted:
		return stDeleted
	case delayq.StateFailed:
		return stFailed
	}
	return 0
}

func stateOf(b byte) delayq.State {
	switch b {
	case stReady:
		return delayq.StateReady
	case stDelayed:
		return delayq.StateDelayed
	case stReserved:
		return delayq.StateReserved
	case stBuried:
		return delayq.StateBuried
	case stFinished:
		return delayq.StateFinished
	case stDeleted:
		return delayq.StateDeleted
	case stFailed:
		return delayq.StateFailed
	}
	return ""
}

// sortable maps a signed millisecond time onto an unsigned value with the
// same order.
func sortable(ms int64) uint64 { return uint64(ms) ^ (1 << 63) }

// The append forms below build a key at the end of dst, so a transition
// can stage its keys through one scratch buffer (Pebble's batch copies
// them): building each key in a fresh slice was a sixth of the objects a
// reserve + delete allocated. The plain forms allocate, for callers off
// the hot path.

func jobKey(id string) []byte { return appendJobKey(nil, id) }

func appendJobKey(dst []byte, id string) []byte { return append(append(dst, prefixJob), id...) }

func seqKey(seq uint64) []byte { return appendSeqKey(nil, seq) }

func appendSeqKey(dst []byte, seq uint64) []byte {
	return binary.BigEndian.AppendUint64(append(dst, prefixSeq), seq)
}

func counterKey(topic string) []byte { return append([]byte{prefixCounter}, topic...) }

// stateIndexPrefix is the prefix of a topic's X keys of one state.
func stateIndexPrefix(topic string, st byte) []byte {
	return appendStateIndexPrefix(make([]byte, 0, len(topic)+3+16), topic, st)
}

func appendStateIndexPrefix(dst []byte, topic string, st byte) []byte {
	dst = append(dst, prefixIndex)
	dst = append(dst, topic...)
	return append(dst, 0, st)
}

// sortKey is the serving-order part of j's X key: priority then seq for
// ready jobs, deadline then seq for reserved ones, ended then seq for
// retained ones, due then seq otherwise.
func sortKey(j *delayq.Job) []byte { return appendSortKey(make([]byte, 0, 16), j) }

func appendSortKey(k []byte, j *delayq.Job) []byte {
	switch j.State {
	case delayq.StateFinished, delayq.StateDeleted, delayq.StateFailed:
		k = binary.BigEndian.AppendUint64(k, sortable(j.Ended.UnixMilli()))
	case delayq.StateReady:
		k = binary.BigEndian.AppendUint32(k, j.Priority)
	case delayq.StateReserved:
		k = binary.BigEndian.AppendUint64(k, sortable(j.Deadline.UnixMilli()))
	default:
		k = binary.BigEndian.AppendUint64(k, sortable(j.Due.UnixMilli()))
	}
	return binary.BigEndian.AppendUint64(k, j.Seq)
}

func indexKey(j *delayq.Job) []byte { return appendIndexKey(nil, j) }

func appendIndexKey(dst []byte, j *delayq.Job) []byte {
	return appendSortKey(appendStateIndexPrefix(dst, j.Topic, stateByte(j.State)), j)
}

// indexValue is due ms + id, so a ready job's heap entry can be rebuilt at
// open without reading its record.
func indexValue(j *delayq.Job) []byte { return appendIndexValue(make([]byte, 0, 8+len(j.ID)), j) }

func appendIndexValue(dst []byte, j *delayq.Job) []byte {
	return append(binary.BigEndian.AppendUint64(dst, uint64(j.Due.UnixMilli())), j.ID...)
}

func dueKeyOf(dueMS int64, seq uint64) []byte { return appendDueKey(make([]byte, 0, 17), dueMS, seq) }

func appendDueKey(dst []byte, dueMS int64, seq uint64) []byte {
	dst = append(dst, prefixDue)
	dst = binary.BigEndian.AppendUint64(dst, sortable(dueMS))
	return binary.BigEndian.AppendUint64(dst, seq)
}

func dueKey(j *delayq.Job) []byte { return dueKeyOf(j.Due.UnixMilli(), j.Seq) }

// expiryKey is a retained job's E key: its Ended, then its seq. Keyed by
// Ended rather than by the end of its retention, the index stays in
// expiry order when a restart changes the retention.
func expiryKey(j *delayq.Job) []byte {
	k := make([]byte, 1, 17)
	k[0] = prefixExpiry
	k = binary.BigEndian.AppendUint64(k, sortable(j.Ended.UnixMilli()))
	return binary.BigEndian.AppendUint64(k, j.Seq)
}

// expiryValue is what an E key holds: enough to remove the retained
// job's keys (J, S, X, E) without reading its record.
func expiryValue(j *delayq.Job) []byte {
	v := make([]byte, 0, 1+binary.MaxVarintLen64+len(j.Topic)+len(j.ID))
	v = append(v, stateByte(j.State))
	v = appendString(v, j.Topic)
	return append(v, j.ID...)
}

// decodeExpiry is the job an E key and its value name, with the fields
// its keys need (ID, Seq, Topic, State, Ended).
func decodeExpiry(k, v []byte) (*delayq.Job, error) {
	if len(k) != 17 || len(v) < 2 {
		return nil, fmt.Errorf("%w: expiry entry %x", errCorrupt, k)
	}
	d := decoder{b: v[1:]}
	j := &delayq.Job{State: stateOf(v[0]), Topic: d.string()}
	j.ID = string(d.b)
	j.Ended = time.UnixMilli(int64(binary.BigEndian.Uint64(k[1:9]) ^ (1 << 63)))
	j.Seq = binary.BigEndian.Uint64(k[9:])
	if d.err != nil || !j.State.Retained() || j.ID == "" {
		return nil, fmt.Errorf("%w: expiry entry %x", errCorrupt, k)
	}
	return j, nil
}

// prefixEnd is the smallest key greater than every key starting with p.
func prefixEnd(p []byte) []byte {
	end := append([]byte(nil), p...)
	for i := len(end) - 1; i >= 0; i-- {
		end[i]++
		if end[i] != 0 {
			return end[:i+1]
		}
	}
	return nil
}
