package redisstore

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/google/uuid"
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
	var u uuid.UUID
	binary.BigEndian.PutUint64(u[0:8], ms<<16|0x7000|freshMarker)
	binary.BigEndian.PutUint64(u[8:16], 1<<63|seq&freshSeqMax)
	return u.String()
}

// canonicalUUID reads id when it is a UUID in the form uuid.UUID.String
// writes (36 characters, lower-case hex): uuid.Parse also takes upper
// case, braces and a urn: prefix, which would make two ids of one job.
func canonicalUUID(id string) (uuid.UUID, bool) {
	if len(id) != 36 {
		return uuid.UUID{}, false
	}
	u, err := uuid.Parse(id)
	return u, err == nil && u.String() == id
}

// uuidV7Millis is the timestamp of id when it is a canonical UUIDv7.
func uuidV7Millis(id string) (uint64, bool) {
	u, ok := canonicalUUID(id)
	if !ok || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
		return 0, false
	}
	return binary.BigEndian.Uint64(u[0:8]) >> 16, true
}

// freshSeq is the seq an id the server made carries: ok when id is a
// canonical UUIDv7 with freshMarker and a seq that is not 0. A
// producer's own id may pass too (1 in 4096 UUIDv7s): the seq is then
// only where to look first, and the record there must have this id.
func freshSeq(id string) (seq uint64, ok bool) {
	u, ok := canonicalUUID(id)
	if !ok || binary.BigEndian.Uint16(u[6:8]) != 0x7000|freshMarker || u.Variant() != uuid.RFC4122 {
		return 0, false
	}
	seq = binary.BigEndian.Uint64(u[8:16]) & freshSeqMax
	return seq, seq != 0
}

// freshRef is the reference of mode "p" (locate) to the job seq whose id
// is id.
func freshRef(seq uint64, id string) string {
	return strconv.FormatUint(seq, 10) + "|" + id
}
