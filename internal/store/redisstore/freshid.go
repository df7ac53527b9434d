package redisstore

import (
	"encoding/hex"
	"strconv"
	"time"
)

// Ids the server made carry their seq (issue 31).
//
// PutFresh (the engine made every id: a beanstalkd put, an HTTP put
// without an id) replaces each job's id with one of its own, made when
// the seq is known: a UUIDv7 that keeps the engine's millisecond
// timestamp, with a fixed 12-bit marker in rand_a and the seq in the 62
// bits of rand_b. Such a job needs no id claim (P:id:{<id>}), which on one
// node was one of a fresh put's five writes and on a Cluster a request
// to another master per put, and then a compare-and-delete or a retained
// SET per finish: a lookup by id decodes the seq, finds the topic as a
// lookup by seq does (the seq -> topic shard, or the instance's
// seqTopics), and the topic's script checks that the record there has
// that id (locate's mode "p").
//
// Any UUIDv7 has the marker by chance, 1 in 4096 of a producer's own ids:
// a lookup of an id that decodes tries the seq first and falls back to
// the claim, and such an id is claimed as any other producer's id is.

// freshMarker is the 12 bits of rand_a that mark an id the server made.
const freshMarker = 0xd1a

// freshSeqMax bounds what rand_b holds: 62 bits (the variant takes 2).
const freshSeqMax = 1<<62 - 1

// freshID is the id of a job put by PutFresh with seq: a UUIDv7 whose
// timestamp is that of id, the engine's UUIDv7 (the current time when id
// is none: a store's conformance tests put other ids), its rand_a
// freshMarker and its rand_b seq. seq must be at most freshSeqMax (seqs
// follow the clock in µs: 2^51 until the year 2041, 2^62 far beyond).
func freshID(id string, seq uint64) string {
	ms, ok := uuidV7Millis(id)
	if !ok {
		ms = uint64(time.Now().UnixMilli())
	}
	var b [16]byte
	for i := 0; i < 6; i++ {
		b[i] = byte(ms >> (40 - 8*i))
	}
	b[6] = 0x70 | byte(freshMarker>>8)
	b[7] = byte(freshMarker & 0xff)
	seq &= freshSeqMax
	b[8] = 0x80 | byte(seq>>56)
	for i := 9; i < 16; i++ {
		b[i] = byte(seq >> (8 * (15 - i)))
	}
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:36], b[10:16])
	return string(s[:])
}

// uuidBytes reads a UUID in its canonical form (36 characters, lower
// case hex, dashes at 8, 13, 18 and 23: the form freshID writes).
func uuidBytes(id string) (b [16]byte, ok bool) {
	if len(id) != 36 || id[8] != '-' || id[13] != '-' || id[18] != '-' || id[23] != '-' {
		return b, false
	}
	h := id[0:8] + id[9:13] + id[14:18] + id[19:23] + id[24:36]
	for i := 0; i < len(h); i++ {
		if c := h[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return b, false
		}
	}
	_, err := hex.Decode(b[:], []byte(h))
	return b, err == nil
}

// uuidV7Millis is the timestamp of id when it is a canonical UUIDv7.
func uuidV7Millis(id string) (uint64, bool) {
	b, ok := uuidBytes(id)
	if !ok || b[6]>>4 != 7 || b[8]>>6 != 2 {
		return 0, false
	}
	var ms uint64
	for i := 0; i < 6; i++ {
		ms = ms<<8 | uint64(b[i])
	}
	return ms, true
}

// freshSeq is the seq an id the server made carries: ok when id is a
// canonical UUIDv7 with freshMarker and a seq that is not 0. A
// producer's own id may pass too (1 in 4096 UUIDv7s): the seq is then
// only where to look first, and the record there must have this id.
func freshSeq(id string) (seq uint64, ok bool) {
	b, ok := uuidBytes(id)
	if !ok || b[6] != 0x70|byte(freshMarker>>8) || b[7] != byte(freshMarker&0xff) || b[8]>>6 != 2 {
		return 0, false
	}
	seq = uint64(b[8] & 0x3f)
	for i := 9; i < 16; i++ {
		seq = seq<<8 | uint64(b[i])
	}
	return seq, seq != 0
}

// freshRef is the reference of mode "p" (locate) to the job seq whose id
// is id.
func freshRef(seq uint64, id string) string {
	return strconv.FormatUint(seq, 10) + "|" + id
}
