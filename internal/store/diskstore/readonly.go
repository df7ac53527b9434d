package diskstore

import (
	"fmt"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq"
)

// Starting on a full disk. Pebble's Open replays the WAL into a memtable
// and flushes it to an sstable before it returns; on a filesystem without
// room for that flush it retries forever (seen on a full tmpfs: 2,500
// failed sstable writes a second, no listener ever opened, SIGTERM
// unanswered). So Open looks first: when the free space is below what the
// flush needs (the WAL files' size plus openMargin), it opens Pebble
// read-only, which replays the WAL in memory and writes nothing. The store
// then serves reads (get, list, topics, documents, backup) and refuses
// every transition with ErrDiskFull, Health says why, and watchSpace
// reopens it for writing once the space is there, without a restart.

// openMargin is free space asked for beyond the WAL's size and an eighth
// (the table the flush writes holds the log's keys with a little more
// per key) before a writable open: a new WAL, the manifest and the
// options file, each a few KiB. It was 16 MiB, so freeing 8 MiB never
// let a store that had failed for want of space reopen.
const openMargin = 4 << 20

// reopenCheckEvery is how often a read-only store looks at the free space.
const reopenCheckEvery = time.Second

// openNeeds returns the free bytes a writable open of dir needs, and
// whether dir holds a store at all (a new store has nothing to flush).
func openNeeds(fs vfs.FS, dir string) (need uint64, exists bool, err error) {
	names, err := fs.List(dir)
	if err != nil {
		return 0, false, err
	}
	var logs uint64
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, "MANIFEST-"):
			exists = true
		case strings.HasSuffix(n, ".log"):
			st, err := fs.Stat(fs.PathJoin(dir, n))
			if err != nil {
				return 0, false, err
			}
			logs += uint64(st.Size())
		}
	}
	return logs + logs/8 + openMargin, exists, nil
}

// startReadOnly decides how Open opens an existing store: read-only, and
// why, when the filesystem lacks the room a writable open needs. A new
// store, or free space that cannot be read, opens writable as before.
func (s *Store) startReadOnly(fs vfs.FS) (bool, error) {
	need, exists, err := openNeeds(fs, s.dir)
	if err != nil || !exists {
		return false, nil
	}
	free, err := s.space.free(s.dir)
	if err != nil || free >= need {
		return false, nil
	}
	if s.ballast.release() {
		s.log.Warn("diskstore: the disk is too full to open the store for writes; released the ballast", "ballast_mib", s.ballast.size>>20, "free_mib", free>>20, "need_mib", need>>20)
		if free, err = s.space.free(s.dir); err != nil || free >= need {
			return false, nil
		}
	}
	return true, fmt.Errorf("%w: the data directory's filesystem has %d MiB free and opening the store for writes needs %d MiB (to flush its log); "+
		"serving reads only until space is freed, then writes resume by themselves", delayq.ErrDiskFull, free>>20, (need+1<<20-1)>>20)
}

// watchSpace reopens a read-only store, or one that failed for want of
// space, for writing once the filesystem has the room, then ends; it ends
// too when the store closes.
func (s *Store) watchSpace() {
	defer s.bg.Done()
	fs := s.opts.fsOrDefault()
	t := time.NewTicker(reopenCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		need, _, err := openNeeds(fs, s.dir)
		if err != nil {
			continue
		}
		// A failed store commits nothing more, so the groups it had
		// handed to their awaits end (with the failure) soon; the db
		// must not close under them.
		if s.unsynced.pending.Load() != 0 {
			continue
		}
		if free, err := s.space.free(s.dir); err != nil || free < need {
			// Not yet the room to write: a store that failed still
			// serves reads, from what is on disk.
			if s.reopenReadOnly() {
				return
			}
			continue
		}
		if s.reopenWritable() {
			return
		}
	}
}

// reopenReadOnly turns a store that failed for want of space into a
// read-only one: what is on disk is every acknowledged transition, and
// reading it back needs no space (Pebble replays the log in memory), so
// gets, lists and backups answer again while the disk is full, and
// transitions are refused with ErrDiskFull (507) rather than every call
// with ErrUnavailable (503). A store already read-only is left as it is.
// It reports whether there is nothing more to watch for.
func (s *Store) reopenReadOnly() bool {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.watching = false
		return true
	}
	if s.failed == nil {
		return false
	}
	if g := s.open; g.ops > 0 {
		g.err = s.failed
		close(g.done)
	}
	if err := s.db.Close(); err != nil {
		s.log.Warn("diskstore: closing the failed store to reopen it read-only", "err", err)
	}
	if err := s.openDB(true); err != nil {
		s.failed = fmt.Errorf("diskstore: reopen read-only after running out of space: %w: %w", delayq.ErrUnavailable, err)
		s.log.Error("diskstore: store unusable until restart", "err", err)
		s.watching = false
		return true
	}
	s.failed = nil
	s.readOnly = fmt.Errorf("%w: the disk filled while writing; serving reads only until space is freed, then writes resume by themselves", delayq.ErrDiskFull)
	s.log.Error("diskstore: out of disk space; serving reads only until space is freed")
	return false
}

// reopenWritable swaps the db for a writable one and reloads memory from
// it. For a read-only store memory comes back the same; for a failed one
// it drops whatever a failed write had applied to memory only, which was
// never acknowledged. If the writable open fails, the store opens
// read-only (serving reads) and the watcher tries again. It reports
// whether there is nothing more to watch for.
func (s *Store) reopenWritable() bool {
	s.dbMu.Lock()
	defer s.dbMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || (s.readOnly == nil && s.failed == nil) {
		s.watching = false
		return true
	}
	log := s.log
	if g := s.open; g.ops > 0 {
		// Staged before the failure, never committed: its callers get
		// the failure, as the committer would have told them.
		g.err = s.failed
		close(g.done)
	}
	if err := s.db.Close(); err != nil {
		log.Warn("diskstore: closing the store to reopen it", "err", err)
	}
	start := time.Now()
	if err := s.openDB(false); err != nil {
		log.Error("diskstore: reopening for writes failed; serving reads only", "err", err)
		if err := s.openDB(true); err != nil {
			s.failed = fmt.Errorf("diskstore: reopen read-only after a failed writable open: %w: %w", delayq.ErrUnavailable, err)
			log.Error("diskstore: store unusable until restart", "err", err)
			s.watching = false
			return true
		}
		s.failed = nil
		s.readOnly = fmt.Errorf("%w: reopening the store for writes failed; serving reads only until it succeeds", delayq.ErrDiskFull)
		return false
	}
	s.readOnly, s.failed, s.watching = nil, nil, false
	log.Info("diskstore: space is back; the store takes writes again", "took", time.Since(start).Round(time.Millisecond))
	return true
}
