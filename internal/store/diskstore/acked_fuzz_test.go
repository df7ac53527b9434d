package diskstore

import (
	"bytes"
	"encoding/binary"
	"testing"

	"github.com/cockroachdb/pebble/v2"
)

// FuzzDecodeAckMark: ACKED is read from disk at every start, and a
// damaged file must turn the check off with a warning, never crash Open
// or refuse a sound store on made-up numbers. decodeAckMark never panics
// and accepts only the exact 28 bytes it would write itself (so any
// accepted input re-encodes to the same bytes: a flipped bit or a
// truncation is an error). commitIn, which reads a WAL record's commit
// number during the same start, never panics on any record, and finds
// the number a batch carries.
func FuzzDecodeAckMark(f *testing.F) {
	f.Add(ackMark{commit: 965, seq: 3000}.encode())
	f.Add(ackMark{}.encode())
	f.Add(ackMark{commit: 1<<64 - 1, seq: 1<<64 - 1}.encode())
	f.Add([]byte("DQACKED1"))
	f.Add([]byte{})
	b := pebble.Batch{}
	_ = b.Set(metaCommitKey, binary.BigEndian.AppendUint64(nil, 7), nil)
	_ = b.Set([]byte("other"), []byte("x"), nil)
	f.Add(append([]byte(nil), b.Repr()...))
	f.Fuzz(func(t *testing.T, data []byte) {
		if m, err := decodeAckMark(data); err == nil {
			if !bytes.Equal(m.encode(), data) {
				t.Fatalf("decodeAckMark(%x) = %+v, which encodes to %x: accepted bytes it would not write", data, m, m.encode())
			}
		} else if len(data) == ackMarkSize && bytes.Equal(data[:8], ackMarkMagic[:]) {
			m := ackMark{commit: binary.BigEndian.Uint64(data[8:]), seq: binary.BigEndian.Uint64(data[16:])}
			if bytes.Equal(m.encode(), data) {
				t.Fatalf("decodeAckMark refused %x, its own encoding of %+v: %v", data, m, err)
			}
		}
		_, _ = commitIn(data) // must return on anything
		var fresh pebble.Batch
		_ = fresh.Set([]byte("k"), data, nil)
		_ = fresh.Set(metaCommitKey, binary.BigEndian.AppendUint64(nil, uint64(len(data))), nil)
		if c, ok := commitIn(fresh.Repr()); !ok || c != uint64(len(data)) {
			t.Fatalf("commitIn of a batch carrying commit %d = %d, %v", len(data), c, ok)
		}
	})
}
