package diskstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/delayq/delayq"
)

// Repair: offline salvage of a damaged store.
//
// Repair never changes the original directory's files. It works on a
// copy: every WAL is cut at its first damaged record (Pebble then replays
// what comes before, as it would a torn tail), Pebble opens the copy, the
// newest WAL's readable records after the damage are applied on top (in
// their order; nothing newer exists), and every key is read back, forward
// from the first key and backward from the last, then the jobs the
// indexes name in between one by one (see readStore), so a damaged
// sstable block loses only the records in it. The job records that read
// and pass their checksum go into a fresh store in batches as they are
// read, which rebuilds every index and counter from them, followed by the
// documents (schedules, policies, alarms) and the topics' pauses. The
// original directory is then renamed DIR.damaged-<time> and the fresh
// store takes its name.
//
// What it cannot do: records after the damage in an older WAL are not
// applied (a newer WAL replayed before them would be overwritten by older
// writes), and a damaged MANIFEST (Pebble's list of tables) stops it;
// both are reported, and the original is left as it was.

// RepairOptions configures Repair.
type RepairOptions struct {
	// Logger receives progress (every few seconds on long work) and each
	// damage found. Defaults to discarding.
	Logger *slog.Logger
	// Now names the kept original (DIR.damaged-<Now>). Defaults to
	// time.Now.
	Now func() time.Time
}

// RepairReport says what Repair kept and what it could not read.
type RepairReport struct {
	Dir        string // the repaired data directory
	DamagedDir string // where the original directory now is, untouched
	Jobs       int    // jobs written into the repaired store
	Documents  int    // schedules, policies and alarms kept
	Paused     int    // topic pauses kept
	// WALRecords counts the WAL records applied after damage in the
	// newest WAL (they would have been lost by cutting it there).
	WALRecords int
	// Damage lists what could not be read: a file and offset or key
	// range each, and the job records that failed their checksum.
	Damage []string
	// LostWALRecords counts readable records after damage in older WALs,
	// which Repair does not apply (see above).
	LostWALRecords int
	// BadRecords counts job records that were read but did not decode.
	BadRecords int
	// KeysUnread is true when a damaged sstable block hid a range of keys.
	KeysUnread bool
	// LostCommits counts the group commits the store's high-water mark
	// (ACKED, see acked.go) says were synced and acknowledged but its log
	// no longer holds: their puts are gone, and their reserves, finishes
	// and deletes are undone (those jobs come back as they were before).
	LostCommits uint64
	// LostSeqs counts the job seqs assigned in those commits: at most
	// that many acknowledged jobs were lost (LostFromSeq to LostToSeq).
	// The repaired store never hands those seqs out again.
	LostSeqs               uint64
	LostFromSeq, LostToSeq uint64
}

// Clean reports whether Repair found nothing it could not read.
func (r *RepairReport) Clean() bool { return len(r.Damage) == 0 }

// repairBatch is how many jobs one write of the fresh store holds; tests
// lower it.
var repairBatch = 1000

// Repair salvages the store in dir (see the comment at the top). The
// store must not be open: Repair takes the directory's lock.
func Repair(ctx context.Context, dir string, opts RepairOptions) (*RepairReport, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	log := opts.Logger
	dir = filepath.Clean(dir)
	if err := isStoreDir(dir); err != nil {
		return nil, err
	}
	lock, err := pebble.LockDirectory(dir, vfs.Default)
	if err != nil {
		if locked(err) {
			return nil, fmt.Errorf("repair: %s is in use by a running delayq server (its LOCK file is held); stop it first", dir)
		}
		return nil, fmt.Errorf("repair: lock %s: %w", dir, err)
	}
	defer func() { _ = lock.Close() }()

	stamp := opts.Now().UTC().Format("20060102T150405Z")
	rep := &RepairReport{Dir: dir, DamagedDir: dir + ".damaged-" + stamp}
	work, fresh := dir+".repair-work-"+stamp, dir+".repair-new-"+stamp
	for _, d := range []string{rep.DamagedDir, work, fresh} {
		if _, err := os.Lstat(d); err == nil {
			return nil, fmt.Errorf("repair: %s already exists; move it away or retry in a second", d)
		}
	}
	defer os.RemoveAll(work) // a copy of ours; the original is kept whole
	mark, err := readAckMark(vfs.Default, dir)
	if err != nil {
		log.Warn("repair: cannot read the acknowledged high-water mark; what the log lost beyond its damage cannot be told", "err", err)
	}
	log.Info("repair: copying the store to work on", "from", dir, "to", work)
	if err := copyStore(dir, work); err != nil {
		return nil, fmt.Errorf("repair: copy %s: %w", dir, err)
	}
	tail, err := cutWALs(work, rep, log)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	out, err := newSink(ctx, fresh, rep, log)
	if err != nil {
		return nil, fmt.Errorf("repair: create the repaired store: %w", err)
	}
	if err := readStore(ctx, work, tail, out); err != nil {
		_ = out.s.Close()
		_ = os.RemoveAll(fresh)
		return nil, fmt.Errorf("repair: %w", err)
	}
	out.shortOf(mark)
	if err := out.finish(); err != nil {
		_ = os.RemoveAll(fresh)
		return nil, fmt.Errorf("repair: write the repaired store: %w", err)
	}
	if err := os.Rename(dir, rep.DamagedDir); err != nil {
		_ = os.RemoveAll(fresh)
		return nil, fmt.Errorf("repair: keep the original as %s: %w", rep.DamagedDir, err)
	}
	if err := os.Rename(fresh, dir); err != nil {
		return nil, fmt.Errorf("repair: the original is now %s, the repaired store is %s; rename it to %s by hand: %w", rep.DamagedDir, fresh, dir, err)
	}
	syncDir(filepath.Dir(dir))
	log.Info("repair: done", "jobs", rep.Jobs, "documents", rep.Documents, "damage", len(rep.Damage), "original_kept_as", rep.DamagedDir)
	return rep, nil
}

// isStoreDir refuses a directory that holds no Pebble database.
func isStoreDir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("repair: %w", err)
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "MANIFEST-") {
			return nil
		}
	}
	return fmt.Errorf("repair: %s holds no delayq store (no MANIFEST file)", dir)
}

// copyStore copies the files of a store (not its LOCK, its ballast, nor
// subdirectories such as backup checkpoints) into a new directory. Sstables are
// immutable, so they are hard-linked when the filesystem allows.
func copyStore(from, to string) error {
	if err := os.Mkdir(to, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" || e.Name() == ballastName || e.Name() == ballastName+".tmp" {
			continue
		}
		src, dst := filepath.Join(from, e.Name()), filepath.Join(to, e.Name())
		if strings.HasSuffix(e.Name(), ".sst") && os.Link(src, dst) == nil {
			continue
		}
		if err := copyFile(src, dst); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}

// cutWALs reads every WAL of the work copy, reports its damage and cuts
// it at its first damaged record. It returns the newest WAL's readable
// records after that point, to be applied once Pebble has opened.
func cutWALs(work string, rep *RepairReport, log *slog.Logger) ([]walRecord, error) {
	logs, err := wal.Scan(wal.Dir{FS: vfs.Default, Dirname: work})
	if err != nil {
		return nil, fmt.Errorf("list WAL files: %w", err)
	}
	var tail []walRecord
	for i, ll := range logs {
		for seg := range ll.NumSegments() {
			_, path := ll.SegmentLocation(seg)
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, err
			}
			name := filepath.Base(path)
			recs, bad, first := salvageWAL(b, uint32(ll.Num))
			for _, sp := range bad {
				if !sp.torn {
					rep.Damage = append(rep.Damage, fmt.Sprintf("WAL %s %s", name, sp))
				}
				log.Warn("repair: unreadable WAL bytes", "file", name, "from", sp.from, "to", sp.to, "torn_tail", sp.torn)
			}
			if first < 0 && i < len(logs)-1 {
				// An older WAL must end cleanly for Pebble to replay it:
				// cut its torn tail too (unacknowledged writes).
				for _, sp := range bad {
					first = sp.from
					break
				}
			}
			if first < 0 {
				continue
			}
			var after []walRecord
			for _, r := range recs {
				if r.off > first {
					after = append(after, r)
				}
			}
			if i == len(logs)-1 {
				tail = after
				rep.WALRecords = len(after)
			} else if len(after) > 0 {
				rep.LostWALRecords += len(after)
				rep.Damage = append(rep.Damage, fmt.Sprintf("WAL %s: %d readable records after the damage not applied (an older WAL; newer ones were replayed first)", name, len(after)))
			}
			if err := os.Truncate(path, int64(first)); err != nil {
				return nil, err
			}
			log.Info("repair: WAL cut at its first damage", "file", name, "offset", first, "records_after", len(after))
		}
	}
	return tail, nil
}

// readStore opens the work copy with Pebble, applies the newest WAL's
// records after its damage, and sends every key it can read to out, as it
// reads them (a repair holds one batch of jobs in memory, not the store).
//
// It reads forward from the first key until the end or a damaged block;
// if one stopped it, backward from the last key down to where the forward
// scan stopped, which gets past one damaged block. The keys between stay
// unread (a backward scan also misses the first key after a damaged
// block: it must look at the key before to finish one). The indexes name
// every job, so each job they name whose record lies in that hole is
// then looked up on its own: a point read needs only the block that holds
// that record.
func readStore(ctx context.Context, work string, tail []walRecord, out *sink) error {
	rep, log := out.rep, out.log
	cache := pebble.NewCache(32 << 20)
	defer cache.Unref()
	o := Options{Logger: log}
	o.setDefaults()
	po := pebbleOptions(o, cache)
	po.EventListener = &pebble.EventListener{DataCorruption: func(info pebble.DataCorruptionInfo) {
		log.Warn("repair: damaged sstable block", "file", filepath.Base(info.Path), "detail", info.Details)
	}}
	db, err := openRecovering(work, po)
	if err != nil {
		return fmt.Errorf("Pebble cannot open the store even with its WALs cut at the damage (is the MANIFEST damaged?); nothing was changed: %w", err)
	}
	defer func() { _ = db.Close() }()
	for i, r := range tail {
		b := db.NewBatch()
		if err := b.SetRepr(r.data); err != nil {
			rep.Damage = append(rep.Damage, fmt.Sprintf("WAL record at offset %d: not a batch: %v", r.off, err))
			continue
		}
		if err := db.Apply(b, pebble.NoSync); err != nil {
			rep.Damage = append(rep.Damage, fmt.Sprintf("WAL record at offset %d: %v", r.off, err))
		}
		if i%10_000 == 9_999 {
			log.Info("repair: applying WAL records after the damage", "done", i+1, "of", len(tail))
		}
	}
	out.version = storeVersion(db)
	if out.commit, err = dbCommit(db); err != nil {
		rep.Damage = append(rep.Damage, fmt.Sprintf("the last commit number cannot be read: %v", err))
	}

	// A reserved job's reservation may sit in its X value (an overlay,
	// overlay.go), which the scan below reaches after the job's record:
	// read the overlays first. One in a damaged block is lost with the
	// block (reported by the scan), and its job comes back as the
	// reserve found it.
	if _, err := scanRange(ctx, db, []byte{prefixIndex}, func(_, v []byte) (bool, error) {
		if _, id, ov, err := splitIndexValue(v); err == nil && ov != nil {
			out.overlays[string(id)] = bytes.Clone(ov)
		}
		return true, nil
	}); err != nil {
		return err
	}

	progress := newProgress(log, "repair: reading keys")
	n := 0
	var lastFwd, firstBwd []byte // the hole is between them (nil: open-ended)
	fwdErr, err := scan(ctx, db, true, func(k, v []byte) (bool, error) {
		lastFwd = k
		n++
		progress.tick(n)
		return true, out.keep(k, v)
	})
	if err != nil {
		return err
	}
	if fwdErr == nil {
		return nil
	}
	bwdErr, err := scan(ctx, db, false, func(k, v []byte) (bool, error) {
		if lastFwd != nil && bytes.Compare(k, lastFwd) <= 0 {
			return false, nil // read going forward
		}
		firstBwd = k
		n++
		progress.tick(n)
		return true, out.keep(k, v)
	})
	if err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rep.KeysUnread = true
	for _, e := range []error{fwdErr, bwdErr} {
		if e == nil {
			continue
		}
		where := "an sstable"
		if f := sstableIn(e.Error(), ""); f != "" {
			where = f
		}
		rep.Damage = append(rep.Damage, fmt.Sprintf("%s: a damaged block hides the keys in it (%v)", where, e))
	}
	inHole := func(k []byte) bool {
		return (lastFwd == nil || bytes.Compare(k, lastFwd) > 0) && (firstBwd == nil || bytes.Compare(k, firstBwd) < 0)
	}
	looked, unread := map[string]bool{}, 0
	for _, prefix := range []byte{prefixSeq, prefixDue, prefixIndex} {
		// An index range in the hole reads as far as it can.
		_, err := scanRange(ctx, db, []byte{prefix}, func(k, v []byte) (bool, error) {
			id := indexedID(k[0], v)
			jk := jobKey(id)
			if id == "" || looked[id] || !inHole(jk) {
				return true, nil
			}
			looked[id] = true
			jv, closer, err := db.Get(jk)
			switch {
			case errors.Is(err, pebble.ErrNotFound):
				return true, nil // an index entry of a lost write; the job is gone
			case err != nil:
				unread++
				return true, nil
			}
			jv = bytes.Clone(jv)
			_ = closer.Close()
			return true, out.keep(jk, jv)
		})
		if err != nil {
			return err
		}
	}
	if unread > 0 {
		rep.Damage = append(rep.Damage, fmt.Sprintf("%d jobs named by the indexes have records in damaged blocks", unread))
	}
	return nil
}

// indexedID is the job id an index key's value names: S and G values are
// the id, X values the due time (8 bytes) then the id.
func indexedID(prefix byte, v []byte) string {
	if prefix == prefixIndex {
		_, id, _, err := splitIndexValue(v)
		if err != nil {
			return ""
		}
		return string(id)
	}
	return string(v)
}

// openRecovering opens Pebble, turning a panic into an error.
func openRecovering(dir string, po *pebble.Options) (db *pebble.DB, err error) {
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("pebble panicked: %v", r)
		}
	}()
	return pebble.Open(dir, po)
}

// storeVersion reads the format version; 0 when it cannot, and records
// are then tried in both formats.
func storeVersion(db *pebble.DB) uint32 {
	v, closer, err := db.Get(metaVersionKey)
	if err != nil {
		return 0
	}
	defer func() { _ = closer.Close() }()
	if len(v) != 4 {
		return 0
	}
	return binary.BigEndian.Uint32(v)
}

// scan reads the keys of db in one direction, calling fn for each until
// fn says stop, the end, or the first read error (a damaged block), which
// it returns as readErr; an error of fn's is returned as err.
func scan(ctx context.Context, db *pebble.DB, forward bool, fn func(k, v []byte) (bool, error)) (readErr, err error) {
	return scanIter(ctx, db, nil, forward, fn)
}

// scanRange is scan forward over the keys with prefix.
func scanRange(ctx context.Context, db *pebble.DB, prefix []byte, fn func(k, v []byte) (bool, error)) (readErr, err error) {
	return scanIter(ctx, db, &pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)}, true, fn)
}

func scanIter(ctx context.Context, db *pebble.DB, o *pebble.IterOptions, forward bool, fn func(k, v []byte) (bool, error)) (readErr, err error) {
	it, err := db.NewIter(o)
	if err != nil {
		return err, nil
	}
	defer func() { _ = it.Close() }()
	ok := it.First()
	if !forward {
		ok = it.Last()
	}
	for ; ok; ok = advance(it, forward) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		v, verr := it.ValueAndErr()
		if verr != nil {
			return verr, nil
		}
		more, err := fn(bytes.Clone(it.Key()), bytes.Clone(v))
		if err != nil || !more {
			return nil, err
		}
	}
	return it.Error(), nil
}

// keep takes one key of the damaged store: job records (decoded, so a
// damaged one is counted and left out), documents, pauses and the last
// seq; the indexes and counters are rebuilt from the records.
func (k *sink) keep(key, v []byte) error {
	if len(key) == 0 {
		return nil
	}
	switch key[0] {
	case prefixJob:
		j, err := decodeAny(v, k.version)
		if err != nil || j.ID != string(key[1:]) {
			if err == nil {
				err = fmt.Errorf("record holds job %q", j.ID)
			}
			k.rep.BadRecords++
			k.rep.Damage = append(k.rep.Damage, fmt.Sprintf("job record %q: %v", key[1:], err))
			return nil
		}
		if ov := k.overlays[j.ID]; ov != nil {
			n, err := applyOverlay(j, ov)
			if err != nil {
				k.rep.Damage = append(k.rep.Damage, fmt.Sprintf("reservation of job %q (kept as its record holds it): %v", j.ID, err))
				return k.job(j)
			}
			j = n
		}
		return k.job(j)
	case prefixDoc:
		k.docs = append(k.docs, [2][]byte{key, v})
	case prefixCounter:
		if c, err := decodeCounts(v); err == nil && !c.paused.IsZero() {
			k.pauses[string(key[1:])] = c.paused
		}
	case prefixMeta:
		if bytes.Equal(key, metaSeqKey) && len(v) == 8 {
			k.lastSeq = max(k.lastSeq, binary.BigEndian.Uint64(v))
		}
	}
	return nil
}

// decodeAny decodes a job record of the given format version; of an
// unknown version, whichever format reads.
func decodeAny(v []byte, version uint32) (*delayq.Job, error) {
	switch version {
	case 1:
		return decodeRecord(v)
	case 2, 3, formatVersion:
		return openRecord(v)
	}
	if j, err := openRecord(v); err == nil {
		return j, nil
	}
	return decodeRecord(v)
}

// sink writes what readStore salvages into the fresh store, jobs in
// batches as they come.
type sink struct {
	ctx      context.Context
	s        *Store
	rep      *RepairReport
	log      *slog.Logger
	progress *progress
	version  uint32 // of the damaged store, to decode its records

	jobs     []*delayq.Job     // the batch being filled
	overlays map[string][]byte // id -> reserved X value with an overlay
	docs     [][2][]byte       // key, value: few, kept for the end
	pauses   map[string]time.Time
	lastSeq  uint64
	commit   uint64 // the last group commit the damaged store's log holds
}

// shortOf reports what the log lost against the high-water mark m (nil:
// none was read), and raises the last seq to the mark's so the repaired
// store never reuses a seq an acknowledged job had.
func (k *sink) shortOf(m *ackMark) {
	if m == nil || k.commit >= m.commit {
		return
	}
	r := k.rep
	r.LostCommits = m.commit - k.commit
	if m.seq > k.lastSeq {
		r.LostSeqs, r.LostFromSeq, r.LostToSeq = m.seq-k.lastSeq, k.lastSeq+1, m.seq
	}
	r.Damage = append(r.Damage, fmt.Sprintf("the log ends %d acknowledged commits short of its high-water mark (%s: commit %d, job seq %d; the log holds commit %d, seq %d): "+
		"they cannot be read back from anywhere; up to %d jobs put in them are lost, and reserves, finishes and deletes made in them are undone",
		r.LostCommits, ackMarkName, m.commit, m.seq, k.commit, k.lastSeq, r.LostSeqs))
	k.log.Warn("repair: the log falls short of its acknowledged high-water mark", "lost_commits", r.LostCommits, "lost_seqs", r.LostSeqs)
	k.lastSeq = max(k.lastSeq, m.seq)
}

// newSink creates the fresh store at dir.
func newSink(ctx context.Context, dir string, rep *RepairReport, log *slog.Logger) (*sink, error) {
	s, err := Open(dir, Options{Logger: log, MinFree: -1, HotSize: -1})
	if err != nil {
		return nil, err
	}
	return &sink{ctx: ctx, s: s, rep: rep, log: log, progress: newProgress(log, "repair: writing jobs"), pauses: map[string]time.Time{}, overlays: map[string][]byte{}}, nil
}

// job adds a salvaged job, writing the batch when it is full.
func (k *sink) job(j *delayq.Job) error {
	k.jobs = append(k.jobs, j)
	if len(k.jobs) < repairBatch {
		return nil
	}
	return k.flush()
}

// flush writes the jobs batched so far, keeping their seqs.
func (k *sink) flush() error {
	if len(k.jobs) == 0 {
		return nil
	}
	err := k.s.write(k.ctx, "repair", func(t *txn) error {
		for _, j := range k.jobs {
			t.seq = max(t.seq, j.Seq)
			t.stage(nil, j)
		}
		return nil
	})
	if err != nil {
		return err
	}
	k.rep.Jobs += len(k.jobs)
	k.progress.tick(k.rep.Jobs)
	k.jobs = k.jobs[:0]
	return nil
}

// finish writes the last jobs, the documents, the pauses and the last
// seq, and closes the fresh store.
func (k *sink) finish() error {
	if err := k.flush(); err != nil {
		_ = k.s.Close()
		return err
	}
	err := k.s.write(k.ctx, "repair", func(t *txn) error {
		t.seq = max(t.seq, k.lastSeq)
		for _, d := range k.docs {
			if err := t.b.Set(d[0], d[1], nil); err != nil {
				return err
			}
		}
		for topic, until := range k.pauses {
			t.topicCounts(topic).paused = until
		}
		return nil
	})
	if err != nil {
		_ = k.s.Close()
		return err
	}
	k.rep.Documents, k.rep.Paused = len(k.docs), len(k.pauses)
	k.log.Info("repair: writing jobs", "done", k.rep.Jobs)
	// An empty txn is not committed: make sure the last seq is on disk
	// even when nothing else was kept.
	// (An empty txn is not applied either, so its t.seq is not: take the
	// larger of the two here.)
	return errors.Join(k.s.setDurable(metaSeqKey, binary.BigEndian.AppendUint64(nil, max(k.s.seqNow(), k.lastSeq))), k.s.Close())
}

// seqNow is the last seq assigned.
func (s *Store) seqNow() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.seq
}

// progress logs how far a long step got, at most every few seconds.
type progress struct {
	log  *slog.Logger
	msg  string
	last time.Time
}

func newProgress(log *slog.Logger, msg string) *progress {
	return &progress{log: log, msg: msg, last: time.Now()}
}

func (p *progress) tick(n int) {
	if time.Since(p.last) >= progressEvery {
		p.last = time.Now()
		p.log.Info(p.msg, "done", n)
	}
}

func advance(it *pebble.Iterator, forward bool) bool {
	if forward {
		return it.Next()
	}
	return it.Prev()
}
