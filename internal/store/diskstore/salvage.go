package diskstore

import "fmt"

// Reading a damaged WAL for repair: unlike checkWAL, which only decides
// whether the newest WAL may be opened, salvageWAL walks every chunk of
// a log with its own parser (Pebble's reader cannot go on past damage)
// and resynchronises on the next intact chunk that starts a record, so
// the records after the damage are kept too.

// walRecord is one record (a Pebble batch) read back from a WAL.
type walRecord struct {
	off  int // offset of its first chunk
	end  int // offset just past its last chunk
	data []byte
}

// walEnd is where the last of recs ends: 0 when there is none.
func walEnd(recs []walRecord) int {
	if len(recs) == 0 {
		return 0
	}
	return recs[len(recs)-1].end
}

// walSpan is a stretch of a WAL that could not be read.
type walSpan struct {
	from, to int
	torn     bool // the torn tail of a write cut short; never acknowledged
	cut      bool // an older WAL's end without its close: cut short
}

func (s walSpan) String() string {
	if s.torn {
		return fmt.Sprintf("bytes %d-%d: torn tail (a write cut short, never acknowledged)", s.from, s.to)
	}
	if s.cut {
		return fmt.Sprintf("bytes %d-%d: cut short (an older WAL ends with the mark of its close, and this one does not)", s.from, s.to)
	}
	return fmt.Sprintf("bytes %d-%d: damaged", s.from, s.to)
}

// Chunk positions, from the chunk type (see walRecyclableFull).
const (
	posFull = iota
	posFirst
	posMiddle
	posLast
)

// chunkPos is the position in its record of a chunk of type typ.
func chunkPos(typ byte) int {
	if typ >= walSyncMin {
		return int(typ - walSyncMin)
	}
	return int(typ - walRecyclableFull)
}

// chunkHeader is the header length of a chunk of type typ.
func chunkHeader(typ byte) int {
	if typ >= walSyncMin {
		return walSyncHeader
	}
	return walRecyclableHdr
}

// salvageWAL reads the records of the log numbered num from b, skipping
// damage. It returns the records in order, the spans it could not read
// and where the first damage (not a torn tail) starts, or -1. clean is
// true when the log ends with the trailer Pebble writes when it closes a
// log: every WAL but the newest must (Pebble replays an older one
// strictly), so an older one without it was cut short.
func salvageWAL(b []byte, num uint32) (recs []walRecord, bad []walSpan, firstDamage int, clean bool) {
	firstDamage = -1
	var cur []byte // payload of the record being assembled
	curOff, inRecord := 0, false
	p := 0
	for p < len(b) {
		if rem := walBlockSize - p%walBlockSize; rem < walSyncHeader && allZero(b[p:min(len(b), p+rem)]) {
			p += rem // block padding
			continue
		}
		c := parseWALChunk(b, p, num)
		if c.trailer {
			clean = true
			break // the log was closed cleanly here
		}
		if c.valid {
			typ := b[p+6]
			payload := b[p+chunkHeader(typ) : c.end]
			switch chunkPos(typ) {
			case posFull:
				recs = append(recs, walRecord{off: p, end: c.end, data: append([]byte(nil), payload...)})
				inRecord = false
			case posFirst:
				cur, curOff, inRecord = append(cur[:0], payload...), p, true
			case posMiddle, posLast:
				if inRecord {
					cur = append(cur, payload...)
					if chunkPos(typ) == posLast {
						recs = append(recs, walRecord{off: curOff, end: c.end, data: append([]byte(nil), cur...)})
						inRecord = false
					}
				}
			}
			p = c.end
			continue
		}
		// Unreadable here: find the next intact chunk of this log that
		// starts a record.
		from := p
		if inRecord {
			from, inRecord = curOff, false // the record it belonged to is lost
		}
		next := -1
		for q := p + 1; q+walRecyclableHdr <= len(b); q++ {
			typ := b[q+6]
			if typ < walRecyclableFull || typ > walSyncMax {
				continue
			}
			if nc := parseWALChunk(b, q, num); nc.valid && (chunkPos(typ) == posFull || chunkPos(typ) == posFirst) {
				next = q
				break
			}
		}
		if next < 0 {
			// Nothing follows: a torn tail, unless the chunk is a complete
			// one of this log with a bad checksum (see checkWALBytes).
			torn := !(c.complete && c.ours && !allZero(b[p:c.end]))
			if allZero(b[p:]) {
				break // preallocated or padded space: the log just ends
			}
			bad = append(bad, walSpan{from: from, to: len(b), torn: torn})
			if !torn && firstDamage < 0 {
				firstDamage = from
			}
			break
		}
		bad = append(bad, walSpan{from: from, to: next})
		if firstDamage < 0 {
			firstDamage = from
		}
		p = next
	}
	if inRecord {
		bad = append(bad, walSpan{from: curOff, to: len(b), torn: true})
	}
	return recs, bad, firstDamage, clean
}
