package diskstore

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/delayq/delayq"
)

// Record checksums (format version 2).
//
// Pebble checksums its WAL chunks and sstable blocks, but not what a value
// means: a value damaged in memory before it was written, or a bug that
// writes one job's bytes under another's key, reads back with Pebble's
// blessing. So every job record is sealed in a frame: the CRC-32C of the
// encoded record (record.go), big-endian, then the record. openRecord
// checks it before decoding, and a mismatch is errChecksum, a corruption
// error, never a wrong job.
//
// The frame is kept apart from the record's own layout so that either can
// change without the other: record.go encodes and decodes a job, this
// file only frames the bytes.

// recordCRCSize is the length of the frame's checksum.
const recordCRCSize = 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errChecksum is returned for a record whose checksum does not match.
var errChecksum = fmt.Errorf("%w: checksum mismatch", errCorrupt)

// sealRecord appends j's sealed record to dst.
func sealRecord(dst []byte, j *delayq.Job) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = encodeRecord(dst, j)
	binary.BigEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+recordCRCSize:], castagnoli))
	return dst
}

// sealBytes frames an encoded record as sealRecord does; the migration
// from format version 1 uses it to keep each record's bytes as they are.
func sealBytes(dst, rec []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, crc32.Checksum(rec, castagnoli))
	return append(dst, rec...)
}

// openRecord checks a sealed record's checksum and decodes it.
func openRecord(b []byte) (*delayq.Job, error) {
	rec, err := unseal(b)
	if err != nil {
		return nil, err
	}
	return decodeRecord(rec)
}

// unseal returns the record inside a frame whose checksum matches.
func unseal(b []byte) ([]byte, error) {
	if len(b) < recordCRCSize {
		return nil, fmt.Errorf("%w: %d bytes", errChecksum, len(b))
	}
	want := binary.BigEndian.Uint32(b)
	if got := crc32.Checksum(b[recordCRCSize:], castagnoli); got != want {
		return nil, fmt.Errorf("%w: stored %08x, computed %08x", errChecksum, want, got)
	}
	return b[recordCRCSize:], nil
}
