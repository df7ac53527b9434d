package diskstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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
// from the first key and backward from the last, so one damaged sstable
// block loses only the keys between. The job records that read and pass
// their checksum, the documents (schedules, policies, alarms) and the
// topics' pauses are written into a fresh store, which rebuilds every
// index and counter from the records. The original directory is then
// renamed DIR.damaged-<time> and the fresh store takes its name.
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
}

// Clean reports whether Repair found nothing it could not read.
func (r *RepairReport) Clean() bool { return len(r.Damage) == 0 }

// repairBatch is how many jobs one write of the fresh store holds.
const repairBatch = 1000

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
	log.Info("repair: copying the store to work on", "from", dir, "to", work)
	if err := copyStore(dir, work); err != nil {
		return nil, fmt.Errorf("repair: copy %s: %w", dir, err)
	}
	tail, err := cutWALs(work, rep, log)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	sv, err := readStore(ctx, work, tail, rep, log)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	if err := writeFresh(ctx, fresh, sv, rep, log); err != nil {
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

// copyStore copies the files of a store (not its LOCK, nor subdirectories
// such as backup checkpoints) into a new directory. Sstables are
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
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
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

// salvaged is what readStore kept.
type salvaged struct {
	jobs    []*delayq.Job
	docs    [][2][]byte // key, value
	pauses  map[string]time.Time
	lastSeq uint64
	ids     map[string]bool // ids the indexes name
}

// readStore opens the work copy with Pebble, applies the newest WAL's
// records after its damage, and reads every key it can.
func readStore(ctx context.Context, work string, tail []walRecord, rep *RepairReport, log *slog.Logger) (*salvaged, error) {
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
		return nil, fmt.Errorf("Pebble cannot open the store even with its WALs cut at the damage (is the MANIFEST damaged?); nothing was changed: %w", err)
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
	version := storeVersion(db)
	sv := &salvaged{pauses: map[string]time.Time{}, ids: map[string]bool{}}
	seen := map[string]bool{}
	keep := func(k, v []byte) {
		if seen[string(k)] {
			return
		}
		seen[string(k)] = true
		sv.keep(k, v, version, rep)
	}
	progress := newProgress(log, "repair: reading keys")
	read := func(k, v []byte) {
		keep(k, v)
		progress.tick(len(seen))
	}
	// Forward from the first key until the end or a damaged block, then,
	// if one stopped it, backward from the last key: that gets past one
	// damaged block (only the keys between damaged blocks stay unread).
	errs := []error{scan(ctx, db, true, read)}
	if errs[0] != nil {
		errs = append(errs, scan(ctx, db, false, read))
	}
	for _, e := range errs {
		if e == nil {
			continue
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		rep.KeysUnread = true
		where := "an sstable"
		if f := sstableIn(e.Error(), ""); f != "" {
			where = f
		}
		rep.Damage = append(rep.Damage, fmt.Sprintf("%s: a damaged block hides the keys in it (%v)", where, e))
	}
	// The scans miss the keys between damaged blocks, and a backward scan
	// also the first key after one (it must look at the key before to
	// finish a key). The indexes name every job, so each job they name
	// whose record was not read is looked up on its own: a point read
	// needs only the block that holds that record.
	unread := 0
	for id := range sv.ids {
		k := jobKey(id)
		if seen[string(k)] {
			continue
		}
		seen[string(k)] = true
		v, closer, err := db.Get(k)
		switch {
		case errors.Is(err, pebble.ErrNotFound):
			continue // an index entry left by a lost write; the job is gone
		case err != nil:
			unread++
			continue
		}
		v = bytes.Clone(v)
		_ = closer.Close()
		sv.keep(k, v, version, rep)
	}
	if unread > 0 {
		rep.Damage = append(rep.Damage, fmt.Sprintf("%d jobs named by the indexes have records in damaged blocks", unread))
	}
	return sv, nil
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

// scan reads every key of db in one direction until the end or the
// first error (a damaged block), calling fn for each.
func scan(ctx context.Context, db *pebble.DB, forward bool, fn func(k, v []byte)) error {
	it, err := db.NewIter(nil)
	if err != nil {
		return err
	}
	defer func() { _ = it.Close() }()
	ok := it.First()
	if !forward {
		ok = it.Last()
	}
	for ; ok; ok = advance(it, forward) {
		if err := ctx.Err(); err != nil {
			return err
		}
		v, err := it.ValueAndErr()
		if err != nil {
			return err
		}
		fn(bytes.Clone(it.Key()), bytes.Clone(v))
	}
	return it.Error()
}

func advance(it *pebble.Iterator, forward bool) bool {
	if forward {
		return it.Next()
	}
	return it.Prev()
}

// keep takes one key of the damaged store: job records (decoded, so a
// damaged one is counted and left out), documents, pauses and the last
// seq; the indexes and counters are rebuilt by writeFresh.
func (sv *salvaged) keep(k, v []byte, version uint32, rep *RepairReport) {
	if len(k) == 0 {
		return
	}
	switch k[0] {
	case prefixJob:
		j, err := decodeAny(v, version)
		if err != nil || j.ID != string(k[1:]) {
			if err == nil {
				err = fmt.Errorf("record holds job %q", j.ID)
			}
			rep.BadRecords++
			rep.Damage = append(rep.Damage, fmt.Sprintf("job record %q: %v", k[1:], err))
			return
		}
		sv.jobs = append(sv.jobs, j)
	case prefixSeq, prefixDue:
		sv.ids[string(v)] = true
	case prefixIndex:
		if len(v) > 8 {
			sv.ids[string(v[8:])] = true
		}
	case prefixDoc:
		sv.docs = append(sv.docs, [2][]byte{k, v})
	case prefixCounter:
		if c, err := decodeCounts(v); err == nil && !c.paused.IsZero() {
			sv.pauses[string(k[1:])] = c.paused
		}
	case prefixMeta:
		if bytes.Equal(k, metaSeqKey) && len(v) == 8 {
			sv.lastSeq = max(sv.lastSeq, binary.BigEndian.Uint64(v))
		}
	}
}

// decodeAny decodes a job record of the given format version; of an
// unknown version, whichever format reads.
func decodeAny(v []byte, version uint32) (*delayq.Job, error) {
	switch version {
	case 1:
		return decodeRecord(v)
	case formatVersion:
		return openRecord(v)
	}
	if j, err := openRecord(v); err == nil {
		return j, nil
	}
	return decodeRecord(v)
}

// writeFresh writes what was salvaged into a new store at dir.
func writeFresh(ctx context.Context, dir string, sv *salvaged, rep *RepairReport, log *slog.Logger) error {
	s, err := Open(dir, Options{Logger: log, MinFree: -1, HotSize: -1})
	if err != nil {
		return err
	}
	slices.SortFunc(sv.jobs, func(a, b *delayq.Job) int { return cmp.Compare(a.Seq, b.Seq) })
	progress := newProgress(log, "repair: writing jobs")
	for i := 0; i < len(sv.jobs); i += repairBatch {
		chunk := sv.jobs[i:min(len(sv.jobs), i+repairBatch)]
		err := s.write(ctx, "repair", func(t *txn) error {
			for _, j := range chunk {
				t.seq = max(t.seq, j.Seq)
				t.stage(nil, j)
			}
			return nil
		})
		if err != nil {
			_ = s.Close()
			return err
		}
		rep.Jobs += len(chunk)
		progress.tick(rep.Jobs)
	}
	err = s.write(ctx, "repair", func(t *txn) error {
		t.seq = max(t.seq, sv.lastSeq)
		for _, d := range sv.docs {
			if err := t.b.Set(d[0], d[1], nil); err != nil {
				return err
			}
		}
		for topic, until := range sv.pauses {
			t.topicCounts(topic).paused = until
		}
		return nil
	})
	if err != nil {
		_ = s.Close()
		return err
	}
	rep.Documents, rep.Paused = len(sv.docs), len(sv.pauses)
	// Seq only: an empty txn is not committed, so make sure the last seq
	// is on disk even when no job was kept.
	return errors.Join(s.db.Set(metaSeqKey, binary.BigEndian.AppendUint64(nil, s.seqNow()), pebble.Sync), s.Close())
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
