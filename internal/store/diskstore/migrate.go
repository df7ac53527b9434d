package diskstore

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// migrateBatch bounds the records one migration batch rewrites, so a
// large store is migrated without holding it all in one batch.
const migrateBatch = 10_000

// progressEvery is how often a long migration or repair logs how far it
// got; tests set it to 0 to see every step.
var progressEvery = 2 * time.Second

// migrateV1 upgrades a store of format version 1 to the current one: it
// seals every job record in its checksum frame (checksum.go, version 2),
// keeping the record's bytes, in batches, then sets the version (version
// 3 and 4 need nothing more, see upgrade). Each record is decoded first, so a
// damaged one is refused (a *CorruptionError naming it) instead of being
// sealed as good. An interrupted migration is resumed: a record that is
// already sealed is left alone.
func (s *Store) migrateV1() error {
	start := time.Now()
	s.log.Info(fmt.Sprintf("diskstore: migrating the store from format version 1 to %d (a checksum on every job record)", formatVersion), "dir", s.dir)
	prefix := []byte{prefixJob}
	it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return err
	}
	defer func() { _ = it.Close() }()
	b := s.db.NewBatch()
	sealed, already, logged := 0, 0, start
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		if rec, err := unseal(v); err == nil {
			if _, err := decodeRecord(rec); err == nil {
				already++
				continue
			}
		}
		if _, err := decodeRecord(v); err != nil {
			return &CorruptionError{Offset: -1, Dir: s.dir, Detail: fmt.Sprintf("job record %q of a version 1 store: %v", it.Key()[1:], err)}
		}
		if err := b.Set(it.Key(), sealBytes(nil, v), nil); err != nil {
			return err
		}
		sealed++
		if int(b.Count()) >= migrateBatch {
			if err := b.Commit(pebble.NoSync); err != nil {
				return err
			}
			_ = b.Close()
			b = s.db.NewBatch()
		}
		if time.Since(logged) >= progressEvery {
			logged = time.Now()
			s.log.Info("diskstore: migrating", "records_sealed", sealed, "elapsed", time.Since(start).Round(time.Millisecond))
		}
	}
	if err := it.Error(); err != nil {
		return err
	}
	defer func() { _ = b.Close() }()
	if err := b.Set(metaVersionKey, binary.BigEndian.AppendUint32(nil, formatVersion), nil); err != nil {
		return err
	}
	// The durable commit also makes the NoSync batches before it durable:
	// they are earlier in the same WAL, or in an older one, synced when
	// Pebble closed it (fsync.go).
	if err := s.commitDurable(b); err != nil {
		return err
	}
	s.log.Info(fmt.Sprintf("diskstore: migrated the store to format version %d", formatVersion), "records_sealed", sealed, "already_sealed", already,
		"elapsed", time.Since(start).Round(time.Millisecond))
	return nil
}

// upgrade upgrades a store of format version 2 or 3 to the current
// one by writing the version alone. Version 3 added a record layout
// (record version 2) and keys (E, and X keys of the retained states),
// version 4 reservation overlays in reserved X values (overlay.go); only
// the new code writes them, and every older key and record reads
// unchanged. The new number is what keeps an older build, which would
// take the new bytes for damage (or, worse, a reserved job for the
// record under it), from opening the store once it holds any.
func (s *Store) upgrade(from uint32) error {
	if err := s.setDurable(metaVersionKey, binary.BigEndian.AppendUint32(nil, formatVersion)); err != nil {
		return err
	}
	s.log.Info(fmt.Sprintf("diskstore: upgraded the store from format version %d to %d (%s; no record rewritten)", from, formatVersion, upgrades[from]), "dir", s.dir)
	return nil
}

// upgrades names what each version after from adds, for upgrade's log.
var upgrades = map[uint32]string{
	2: "job history, retained jobs and reservation overlays",
	3: "reservation overlays",
}
