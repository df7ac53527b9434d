package diskstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/record"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"
)

// The WAL check.
//
// Pebble replays the newest WAL leniently: the first record it cannot
// read ends the replay, as if the process had died while writing it (a
// torn tail). That is right for a record cut short by a crash, which was
// never acknowledged, but a flipped byte in an acknowledged record looks
// the same to it, and Pebble then drops that record and every one after
// it without a word. checkWAL tells the two apart before Pebble opens the
// directory: damage is a torn tail only when nothing of the log follows
// it and the damaged chunk is itself incomplete (cut off by the end of
// the file, or zeroed). A damaged chunk that is complete, or any intact
// chunk of the same log after the damage, means acknowledged data was
// lost, and Open refuses to start with a *CorruptionError.
//
// Older WALs are replayed strictly by Pebble itself (any damage fails its
// Open), and Open turns that failure into a *CorruptionError too.

// Chunk layout of Pebble's record format (pebble/record/record.go): CRC
// (4 bytes), length (2), type (1), then for the recyclable and WAL-sync
// types the log number (4), and for WAL-sync the synced offset (8).
// Types 5-8 are the recyclable full, first, middle and last chunks, 9-12
// the same with the synced offset.
const (
	walBlockSize      = 32 << 10
	walRecyclableHdr  = 11
	walSyncHeader     = 19
	walRecyclableFull = 5
	walRecyclableMax  = 8
	walSyncMin        = 9
	walSyncMax        = 12
)

var walCRCTable = crc32.MakeTable(crc32.Castagnoli)

// walCRC is Pebble's masked CRC-32C of a chunk.
func walCRC(b []byte) uint32 {
	c := crc32.Checksum(b, walCRCTable)
	return (c>>15 | c<<17) + 0xa282ead8
}

// walChunk describes the chunk that starts at an offset of a WAL.
type walChunk struct {
	end      int  // offset just past the chunk
	ours     bool // the type carries a log number and it is this log's
	complete bool // the header and payload fit in the block and the file
	valid    bool // complete, ours and the checksum matches
	trailer  bool // the EOF trailer Pebble writes when it closes a log cleanly
}

// parseWALChunk reads the chunk header at off of a log numbered num.
func parseWALChunk(b []byte, off int, num uint32) walChunk {
	var c walChunk
	blockEnd := min(len(b), (off/walBlockSize+1)*walBlockSize)
	if off+walRecyclableHdr > blockEnd {
		return c
	}
	typ := b[off+6]
	hdr := 0
	switch {
	case typ >= walRecyclableFull && typ <= walRecyclableMax:
		hdr = walRecyclableHdr
	case typ >= walSyncMin && typ <= walSyncMax:
		hdr = walSyncHeader
	default:
		return c
	}
	logNum := binary.LittleEndian.Uint32(b[off+7:])
	length := int(binary.LittleEndian.Uint16(b[off+4:]))
	c.end = off + hdr + length
	c.ours = logNum == num
	c.complete = c.end <= blockEnd && off+hdr <= blockEnd
	if !c.complete {
		return c
	}
	crc := binary.LittleEndian.Uint32(b[off:])
	c.valid = c.ours && crc == walCRC(b[off+6:c.end]) // the CRC only when the log number matches: scans call this at every offset
	// Pebble writes the trailer with no checksum (zero) and the next
	// log's number.
	c.trailer = logNum == num+1 && typ == walRecyclableFull && length == 0 && crc == 0
	return c
}

// walDamage is what checkWALBytes found wrong with a log.
type walDamage struct {
	offset int64  // where the first unreadable record starts
	reason string // why it is not a torn tail
}

// checkWALBytes reads the log numbered num whose bytes are b with
// Pebble's record reader, and classifies the first unreadable record. It
// returns nil when every record reads or the damage is a torn tail.
func checkWALBytes(b []byte, num uint32, readErr error, recStart int64) *walDamage {
	if readErr == nil {
		return nil
	}
	// Find the first bad chunk, walking the chunks of the record that
	// failed (an intact first chunk may be followed by a bad one).
	p := int(recStart)
	for p < len(b) {
		if rem := walBlockSize - p%walBlockSize; rem < walSyncHeader && allZero(b[p:min(len(b), p+rem)]) {
			p += rem // block padding
			continue
		}
		c := parseWALChunk(b, p, num)
		if !c.valid {
			break
		}
		p = c.end
	}
	bad := p
	// Any intact chunk of this log after the bad one (or the trailer that
	// closed it) proves the log went on past the damage.
	for q := bad + 1; q+walRecyclableHdr <= len(b); q++ {
		if typ := b[q+6]; typ < walRecyclableFull || typ > walSyncMax {
			continue
		}
		if c := parseWALChunk(b, q, num); (c.valid && c.end > q+walRecyclableHdr) || c.trailer {
			what := "an intact record"
			if c.trailer {
				what = "the log's clean end"
			}
			return &walDamage{offset: recStart, reason: fmt.Sprintf("unreadable WAL record (%v) followed by %s at offset %d, so this is not a torn write at the end of the log", readErr, what, q)}
		}
	}
	// Nothing follows: a torn tail unless the bad chunk is complete, ours
	// and fails its checksum (a damaged record, not a cut-off one).
	if bad < len(b) {
		if c := parseWALChunk(b, bad, num); c.complete && c.ours && !c.valid && !allZero(b[bad:c.end]) {
			return &walDamage{offset: int64(bad), reason: fmt.Sprintf("the last WAL record is complete but fails its checksum (%v), so it was damaged after it was written", readErr)}
		}
	}
	return nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// walTail is what checkWAL learnt of the newest WAL: its path ("" when
// there is none), where its readable records end, and the last commit
// number they carry (found false when none carries one: an empty log, or
// one cut before its first group).
type walTail struct {
	path   string
	end    int64
	commit uint64
	found  bool
}

// checkWAL checks the newest WAL in dir (see the comment at the top). A
// directory without a WAL passes.
func checkWAL(fs vfs.FS, dir string) (walTail, error) {
	var tail walTail
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return tail, fmt.Errorf("list WAL files: %w", err)
	}
	if len(logs) == 0 {
		return tail, nil
	}
	ll := logs[len(logs)-1]
	if ll.NumSegments() != 1 {
		return tail, nil // WAL failover is not used by this package; Pebble checks it
	}
	_, path := ll.SegmentLocation(0)
	tail.path = path
	recStart, readErr := readWAL(ll, &tail)
	switch {
	case readErr == nil:
		return tail, nil
	case pebble.IsCorruptionError(readErr):
		// An intact chunk that holds no batch: written wrong, or damaged
		// in a way the chunk checksum missed.
		return tail, &CorruptionError{File: path, Offset: recStart, Detail: readErr.Error()}
	case !isInvalidRecord(readErr):
		return tail, fmt.Errorf("read WAL %s: %w", path, readErr)
	}
	f, err := fs.Open(path)
	if err != nil {
		return tail, fmt.Errorf("read WAL %s: %w", path, err)
	}
	b, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		return tail, fmt.Errorf("read WAL %s: %w", path, err)
	}
	if d := checkWALBytes(b, uint32(ll.Num), readErr, recStart); d != nil {
		return tail, &CorruptionError{File: path, Offset: d.offset, Detail: d.reason}
	}
	return tail, nil
}

// isInvalidRecord reports whether err is one of the record reader's
// errors for bytes that are not a record.
func isInvalidRecord(err error) bool {
	return errors.Is(err, record.ErrInvalidChunk) || errors.Is(err, record.ErrZeroedChunk) || errors.Is(err, record.ErrUnexpectedEOF)
}

// readWAL reads every record of ll with Pebble's reader, noting in tail
// where its readable records end and the last commit number they carry.
// It returns the first error other than the end of the log, and the
// offset of the record that failed.
func readWAL(ll wal.LogicalLog, tail *walTail) (int64, error) {
	r := ll.OpenForRead()
	defer func() { _ = r.Close() }()
	var buf bytes.Buffer
	for {
		rec, off, err := r.NextRecord()
		if err == nil {
			buf.Reset()
			_, err = io.Copy(&buf, rec)
		}
		if err != nil {
			tail.end = off.Physical // where the next record would start
			if errors.Is(err, io.EOF) {
				return 0, nil
			}
			return off.Physical, err
		}
		if c, ok := commitIn(buf.Bytes()); ok {
			tail.commit, tail.found = c, true
		}
	}
}
