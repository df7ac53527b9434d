package diskstore

import (
	"encoding/binary"
	"fmt"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq"
)

// load rebuilds memory at open: format check, seq, every topic's counters
// and ready and reserved jobs, and the first chunk of the due index.
// Nothing here is proportional to the number of delayed or buried jobs.
// A read-only load writes nothing (a new store's version waits for the
// reopen).
func (s *Store) load(readOnly bool) error {
	if err := s.checkVersion(readOnly); err != nil {
		return err
	}
	v, ok, err := s.get(metaSeqKey)
	if err != nil {
		return err
	}
	if ok {
		if len(v) != 8 {
			return fmt.Errorf("%w: seq %x", errCorrupt, v)
		}
		s.seq = binary.BigEndian.Uint64(v)
	}
	if err := s.loadTopics(); err != nil {
		return err
	}
	for name := range s.topics {
		if err := s.loadEntries(name, stReady); err != nil {
			return err
		}
		if err := s.loadEntries(name, stReserved); err != nil {
			return err
		}
	}
	return s.near.load(s)
}

// checkVersion writes the format version into a new store, migrates a
// store of version 1, 2 or 3 (migrate.go) and refuses one of any other
// version. Read-only it writes nothing: a new store's version waits for
// the reopen, a version 2 or 3 store is read as it is (it holds nothing
// this build reads differently), and a version 1 store, which needs its
// migration written, is refused.
func (s *Store) checkVersion(readOnly bool) error {
	v, ok, err := s.get(metaVersionKey)
	if err != nil {
		return err
	}
	if ok {
		var ver uint32 // 0: not a version
		if len(v) == 4 {
			ver = binary.BigEndian.Uint32(v)
		}
		switch {
		case ver == 1:
			if readOnly {
				return fmt.Errorf("%w: the store is in format version 1 and must be migrated to version %d, which writes every record; free space on the data directory's filesystem and start again", delayq.ErrDiskFull, formatVersion)
			}
			return s.migrateV1()
		case ver == 2 || ver == 3:
			if readOnly {
				return nil
			}
			return s.upgrade(ver)
		case ver != formatVersion:
			return fmt.Errorf("on-disk format version %x is not %d, the one this build reads; see keys.go", v, formatVersion)
		}
		return nil
	}
	it, err := s.iter(nil)
	if err != nil {
		return err
	}
	empty := !it.First()
	if err := it.Close(); err != nil {
		return err
	}
	if !empty {
		return fmt.Errorf("directory holds a Pebble database without a delayq format version")
	}
	if readOnly {
		return nil
	}
	return s.setDurable(metaVersionKey, binary.BigEndian.AppendUint32(nil, formatVersion))
}

func (s *Store) loadTopics() error {
	prefix := []byte{prefixCounter}
	it, err := s.iter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		c, err := decodeCounts(it.Value())
		if err != nil {
			_ = it.Close()
			return fmt.Errorf("topic %q: %w", it.Key()[1:], err)
		}
		s.topic(string(it.Key()[1:])).counts = c
	}
	return it.Close()
}

// loadEntries brings a topic's ready or reserved index into memory.
func (s *Store) loadEntries(name string, st byte) error {
	prefix := stateIndexPrefix(name, st)
	it, err := s.iter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()[len(prefix):]
		due, id, ov, err := splitIndexValue(it.Value())
		if err != nil || (st == stReady && (len(k) != 12 || ov != nil)) || (st == stReserved && len(k) != 16) {
			_ = it.Close()
			return fmt.Errorf("%w: index key %x", errCorrupt, it.Key())
		}
		e := &entry{topic: name, state: st, id: string(id), due: due}
		if st == stReady {
			e.pri, e.seq, e.at = binary.BigEndian.Uint32(k), binary.BigEndian.Uint64(k[4:]), e.due
		} else {
			e.at, e.seq = int64(binary.BigEndian.Uint64(k)^(1<<63)), binary.BigEndian.Uint64(k[8:])
		}
		s.reinsert(e)
	}
	return it.Close()
}
