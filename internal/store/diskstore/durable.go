package diskstore

import (
	"github.com/cockroachdb/pebble/v2"
)

// One durable-write path.
//
// Every write the store promises to keep reaches the disk the same way:
// Pebble writes it to the WAL through the lazy WAL filesystem (fsync.go),
// whose Sync only marks the data written, and then syncWAL makes it as
// durable as the fsync mode promises: with --fsync always an fdatasync
// of every open WAL that begins after the write, before the caller is
// answered; with the fsync window (--fsync DURATION) nothing more, as the
// window's loop fdatasyncs the WAL within SyncEvery.
//
// Job transitions reach syncWAL through group commit (commit.go: each
// group's await). Every other write that promises durability (documents,
// chart series, the format version and migrations, the repaired store's
// last seq) commits through commitDurable, which ends in the same
// syncWAL. A write through Pebble's own pebble.Sync alone is not durable
// here: the lazy filesystem answers its Sync at once (that was issue 28's
// "non-job writes are never synced").

// syncWAL makes every WAL byte written before the call durable as the
// fsync mode promises (see above).
func (s *Store) syncWAL() error {
	if s.window() {
		return s.wal.failed()
	}
	return s.wal.syncOpen()
}

// commitDurable commits b to Pebble and returns once it is durable (see
// syncWAL). b is not closed. A failed sync is kept by the WAL filesystem,
// so every later commit fails with it too and the store stops taking
// transitions (as after a failed group sync).
func (s *Store) commitDurable(b *pebble.Batch) error {
	// pebble.Sync: in the window mode the WAL's Sync marks its file for
	// the loop's next fdatasync.
	if err := s.db.Apply(b, pebble.Sync); err != nil {
		return err
	}
	return s.syncWAL()
}

// setDurable sets key to v through commitDurable.
func (s *Store) setDurable(key, v []byte) error {
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }()
	if err := b.Set(key, v, nil); err != nil {
		return err
	}
	return s.commitDurable(b)
}

// deleteDurable deletes key through commitDurable.
func (s *Store) deleteDurable(key []byte) error {
	b := s.db.NewBatch()
	defer func() { _ = b.Close() }()
	if err := b.Delete(key, nil); err != nil {
		return err
	}
	return s.commitDurable(b)
}
