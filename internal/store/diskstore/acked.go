package diskstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
	"github.com/cockroachdb/pebble/v2/vfs"
)

// The acknowledged high-water mark.
//
// The WAL check (walcheck.go) tells damage from a torn tail by what
// follows it, so a log cut short at a chunk boundary, or cut in the
// middle with nothing after, looks like a torn tail: the writes of a
// crash that were never acknowledged. It cannot tell whether the records
// after the cut had been acknowledged. So the store writes down how far
// its durable log reached, outside the log:
//
//   - every group commit carries its commit number under metaCommitKey,
//     so the recovered log says how far it got;
//   - once a group's WAL fsync is done, and before any of its callers is
//     answered, the store writes that commit number (and the last job
//     seq) into the small file ACKED beside the WAL (one pwrite of 28
//     bytes, no fsync on the answer's path);
//   - a goroutine fdatasyncs ACKED after it changed, at most every
//     markSyncEvery, off the answer's path.
//
// Open reads ACKED first and refuses to start when the recovered log
// falls short of it, with a *CorruptionError naming the newest WAL and
// `delayq repair`. Repair keeps what is left and says how many commits
// and job seqs the log lost.
//
// Why only what was synced. The mark must never be ahead of what the
// store promised to keep across the failure that happened. A kill -9
// keeps everything written to the OS; a power loss keeps only what was
// fsynced. If the store answers a write before its fsync (a relaxed
// fsync mode), a power loss may lose that write by design, and a mark
// that counted it would refuse to start on a store that lost exactly
// what it was allowed to. So the mark counts only synced commits: any
// shortfall is damage, never an allowed loss. In the always-fsync mode
// every acknowledged write is synced first, so the mark covers every
// acknowledged write.
//
// With the fsync window (--fsync DURATION) a write is answered before its
// fsync; the mark then advances only when the window's loop has synced
// it, so it trails the answers by up to the window: a cut in the last
// window's worth of acknowledged writes goes unseen, after a kill -9 too.
//
// Limits: with every commit synced, after a kill -9 the mark is exact (the pwrite is in the page
// cache before the answer). After a power loss it is as of its last
// fdatasync, which trails by at most markSyncEvery and one sync: the
// check then misses a cut in the last ~100 ms of acknowledged writes,
// and can never fire falsely. A missing or unreadable ACKED (a store from before this
// check, or a restored copy without it) turns the check off until the
// next commit writes a new one; Open logs a warning.

// ackMarkName is the high-water mark file in the data directory.
const ackMarkName = "ACKED"

// ackMarkMagic starts the file, with its format version.
var ackMarkMagic = [8]byte{'D', 'Q', 'A', 'C', 'K', 'E', 'D', '1'}

// ackMarkSize is magic, commit, seq and a CRC-32C of the three.
const ackMarkSize = 8 + 8 + 8 + 4

// metaCommitKey holds the number of the last group commit; every group
// writes it (flushLocked via markGroup).
var metaCommitKey = []byte("Mcommit")

// ackMark is what ACKED says: the last synced commit and the last job seq
// assigned by then.
type ackMark struct {
	commit, seq uint64
}

func (m ackMark) encode() []byte {
	b := append([]byte(nil), ackMarkMagic[:]...)
	b = binary.BigEndian.AppendUint64(b, m.commit)
	b = binary.BigEndian.AppendUint64(b, m.seq)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, walCRCTable))
}

// decodeAckMark parses ACKED's bytes.
func decodeAckMark(b []byte) (ackMark, error) {
	if len(b) != ackMarkSize || !bytes.Equal(b[:8], ackMarkMagic[:]) {
		return ackMark{}, fmt.Errorf("%d bytes, not a high-water mark of this version", len(b))
	}
	if crc32.Checksum(b[:24], walCRCTable) != binary.BigEndian.Uint32(b[24:]) {
		return ackMark{}, errors.New("checksum mismatch")
	}
	return ackMark{commit: binary.BigEndian.Uint64(b[8:]), seq: binary.BigEndian.Uint64(b[16:])}, nil
}

// readAckMark reads dir's ACKED: nil when there is none. A damaged one is
// an error the caller logs: the mark guards the log, and a mark that
// cannot be read must not keep a sound store from starting.
func readAckMark(fs vfs.FS, dir string) (*ackMark, error) {
	f, err := fs.Open(fs.PathJoin(dir, ackMarkName))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := io.ReadAll(io.LimitReader(f, ackMarkSize+1))
	if err != nil {
		return nil, err
	}
	m, err := decodeAckMark(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ackMarkName, err)
	}
	return &m, nil
}

// loadAckMark is readAckMark for Open: an unreadable mark is logged and
// ignored (see the limits above).
func loadAckMark(fs vfs.FS, dir string, log *slog.Logger) *ackMark {
	m, err := readAckMark(fs, dir)
	if err != nil {
		log.Warn("diskstore: cannot read the acknowledged high-water mark; starting without the check that the log holds every acknowledged write", "err", err)
		return nil
	}
	return m
}

// commitIn returns the commit number a WAL record (a batch) carries
// under metaCommitKey, if any. A record that is not a well-formed batch
// carries none past the point where it goes wrong.
//
// Pebble's batch reader trusts its input: a length varint cut short by
// the end of the record makes it index past the record and panic
// (FuzzDecodeAckMark found it), and this runs at every start on records
// read from disk. So each entry is checked to fit before the reader
// decodes it: its key's length varint complete and the key inside the
// record, and whatever follows the key either nothing (the reader is
// then not asked: the entry is the last one, and only a key-only entry
// is well-formed there) or a complete varint (the value's length, or the
// next entry's kind byte), so every byte the reader looks at is inside
// the record.
func commitIn(repr []byte) (uint64, bool) {
	r := batchrepr.Read(repr)
	var commit uint64
	found := false
	for {
		if !entryFits(r) {
			return commit, found
		}
		kind, k, v, ok, err := r.Next()
		if !ok || err != nil {
			return commit, found
		}
		if kind == pebble.InternalKeyKindSet && bytes.Equal(k, metaCommitKey) && len(v) == 8 {
			commit, found = binary.BigEndian.Uint64(v), true
		}
	}
}

// entryFits reports whether the batch entry at the start of rest can be
// handed to batchrepr.Reader.Next without it reading past rest (see
// commitIn).
func entryFits(rest []byte) bool {
	if len(rest) < 2 {
		return false
	}
	klen, n := binary.Uvarint(rest[1:])
	if n <= 0 || klen > uint64(len(rest)-1-n) {
		return false
	}
	after := rest[1+n+int(klen):]
	if len(after) == 0 {
		return false
	}
	_, n = binary.Uvarint(after)
	return n > 0
}

// shortLog is the refusal for a log that ends before the mark: the newest
// WAL (walPath, "" when there is none) recovered up to commit got, and
// ACKED says mark.commit was synced and acknowledged.
func shortLog(dir, walPath string, end int64, got uint64, m *ackMark) *CorruptionError {
	file := walPath
	if file == "" {
		file = filepath.Join(dir, ackMarkName)
		end = -1
	}
	return &CorruptionError{File: file, Offset: end, Dir: dir, Detail: fmt.Sprintf(
		"the log ends at commit %d but %s records that commit %d (job seq %d) was synced and acknowledged: "+
			"%d acknowledged commits are missing, so the log was cut short after it was written (this is not a torn write of a crash)",
		got, ackMarkName, m.commit, m.seq, m.commit-got)}
}

// checkAcked compares the commit Pebble recovered (after Open) with the
// mark: the newest WAL held no commit of its own (empty, or cut before
// its first record), so the last one is in an older WAL or a table.
func checkAcked(db *pebble.DB, dir, walPath string, m *ackMark) (uint64, error) {
	got, err := dbCommit(db)
	if err != nil {
		return 0, err
	}
	if m != nil && got < m.commit {
		return got, shortLog(dir, walPath, -1, got, m)
	}
	return got, nil
}

// dbCommit reads metaCommitKey: 0 in a store that never wrote it.
func dbCommit(db *pebble.DB) (uint64, error) {
	v, closer, err := db.Get(metaCommitKey)
	if errors.Is(err, pebble.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	defer func() { _ = closer.Close() }()
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: commit %x", errCorrupt, v)
	}
	return binary.BigEndian.Uint64(v), nil
}

// markGroup numbers a group about to be committed and writes the number
// into its batch. Requires mu.
func (s *Store) markGroup(g *group) {
	s.commit++
	g.commit, g.seq = s.commit, s.seq
	g.b.Set(metaCommitKey, binary.BigEndian.AppendUint64(nil, g.commit), nil)
}

// markSynced is called in commit order (unsynced.finish), once group g
// is durable and before its callers are answered. With every commit
// synced that is after a WAL fsync that began after g's write
// (commit.go), and the mark advances. With the fsync
// window (--fsync DURATION, fsync.go) SyncWait returns once the WAL
// write reached the kernel: the group is only noted as written, and the
// mark advances when the window's sync loop has really synced it
// (lazyRound). It must never count a group before its fsync (see "why
// only what was synced").
func (s *Store) markSynced(g *group) {
	m := ackMark{commit: g.commit, seq: g.seq}
	if s.window() {
		s.marks.wrote(m)
		return
	}
	s.marks.advance(s, m)
}

// lazyRound is the fsync window's hook: every group noted as written
// before a sync round is durable once that round has synced every dirty
// WAL file (a group's WAL write marks its file dirty before its SyncWait
// returns, so the round takes that file, or a later write marked it again
// after an earlier round took it).
func (s *Store) lazyRound() func() {
	m := s.marks.written()
	return func() {
		if m.commit > 0 {
			s.marks.advance(s, m)
		}
	}
}

// wrote notes a group written to the kernel but not yet synced.
func (mf *markFile) wrote(m ackMark) {
	mf.mu.Lock()
	mf.pending = m
	mf.mu.Unlock()
}

// written is the last group noted by wrote.
func (mf *markFile) written() ackMark {
	mf.mu.Lock()
	defer mf.mu.Unlock()
	return mf.pending
}

// markFile writes ACKED. Its file is opened at the first advance (a
// read-only store never writes it) and closed by Close.
type markFile struct {
	mu      sync.Mutex
	f       vfs.File
	last    ackMark       // last written into the file
	synced  ackMark       // last fdatasynced
	pending ackMark       // fsync window: the last group written to the kernel, not yet synced
	broken  bool          // a write failed: the mark is no longer kept (logged once)
	dirty   chan struct{} // capacity 1: the mark changed
	stop    chan struct{} // closed by close
	done    chan struct{} // closed when the syncer ends
}

// advance writes m into ACKED (no fsync) and wakes the mark syncer.
func (mf *markFile) advance(s *Store, m ackMark) {
	mf.mu.Lock()
	defer mf.mu.Unlock()
	if mf.broken || m.commit <= mf.last.commit {
		return
	}
	if mf.f == nil {
		fs := s.opts.fsOrDefault()
		f, err := fs.OpenReadWrite(fs.PathJoin(s.dir, ackMarkName), vfs.WriteCategoryUnspecified)
		if err != nil {
			mf.breakMark(s, err)
			return
		}
		mf.f = f
		// Make the file's name durable once: a later power loss must not
		// lose the whole file while the WAL it guards survives.
		if err := f.Sync(); err == nil {
			syncDirFS(fs, s.dir)
		}
		mf.dirty, mf.stop, mf.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
		go mf.syncer(s.log)
	}
	if _, err := mf.f.WriteAt(m.encode(), 0); err != nil {
		mf.breakMark(s, err)
		return
	}
	mf.last = m
	select {
	case mf.dirty <- struct{}{}:
	default:
	}
}

// breakMark stops keeping the mark after a write error and removes the
// file, so that a stale mark cannot refuse a later start. Requires mf.mu.
func (mf *markFile) breakMark(s *Store, err error) {
	mf.broken = true
	s.log.Error("diskstore: cannot write the acknowledged high-water mark; the check that the log holds every acknowledged write is off until restart", "err", err)
	fs := s.opts.fsOrDefault()
	_ = fs.Remove(fs.PathJoin(s.dir, ackMarkName))
}

// markSyncEvery spaces the mark's fdatasyncs. Syncing it after every
// group put a second fsync beside each WAL fsync, and one writer's puts
// (one group each) were measured about a quarter slower for it; at most
// ten a second cost nothing measurable, and only a power loss needs them.
const markSyncEvery = 100 * time.Millisecond

// syncer fdatasyncs ACKED when it changed, at most every markSyncEvery,
// until close; it never holds up an answer.
func (mf *markFile) syncer(log *slog.Logger) {
	defer close(mf.done)
	for {
		select {
		case <-mf.dirty:
		case <-mf.stop:
			return
		}
		mf.mu.Lock()
		f, m := mf.f, mf.last
		mf.mu.Unlock()
		if f == nil || m == mf.synced { // closed: close syncs it
			continue
		}
		if err := f.SyncData(); err != nil {
			log.Warn("diskstore: fdatasync of the acknowledged high-water mark failed", "err", err)
		} else {
			mf.synced = m
		}
		select {
		case <-time.After(markSyncEvery):
		case <-mf.stop:
			return
		}
	}
}

// close syncs and closes ACKED. Called by Close once no group is left.
func (mf *markFile) close() error {
	mf.mu.Lock()
	f := mf.f
	mf.f = nil
	mf.broken = true // nothing more after close
	mf.mu.Unlock()
	if f == nil {
		return nil
	}
	close(mf.stop)
	<-mf.done
	return errors.Join(f.SyncData(), f.Close())
}

// syncDirFS fsyncs a directory through fs, best effort.
func syncDirFS(fs vfs.FS, dir string) {
	if d, err := fs.OpenDir(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
