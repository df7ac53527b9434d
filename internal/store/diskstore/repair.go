package diskstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/batchrepr"
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

	// LostIDs names, sorted, the acknowledged jobs Repair knows by id
	// and could not keep: records that failed their checksum or lay in
	// a damaged sstable block (an index named them), and jobs written by
	// WAL records it could not apply. When there are any they are also
	// written, one a line, to LostIDsFile (lost-ids.txt in the repaired
	// data directory).
	LostIDs     []string
	LostIDsFile string
	// LostSeqRanges names the acknowledged jobs lost with unreadable WAL
	// bytes or a log cut short, which cannot be known by id: by the
	// range of seqs they were given.
	LostSeqRanges []LostSeqRange
	// UnreadIDRanges names the jobs whose records lay in a damaged
	// sstable block that no readable index entry named: by the range
	// their ids sort in.
	UnreadIDRanges []IDRange
}

// LostSeqRange is a range of job seqs in which Repair lost the Missing
// jobs the repaired store lacks (a seq of the range may also belong to a
// job deleted before the damage: Missing is "up to").
type LostSeqRange struct {
	From, To uint64 // inclusive
	Missing  int
	Where    string // the damage it comes from
}

// IDRange is a range of job ids: those sorting strictly after After and
// before Before ("" leaves that end open).
type IDRange struct {
	After, Before string
	Where         string
}

// Has reports whether id is in r.
func (r IDRange) Has(id string) bool {
	return (r.After == "" || id > r.After) && (r.Before == "" || id < r.Before)
}

// lostIDsName is the file in the repaired data directory that lists the
// ids of the jobs Repair lost.
const lostIDsName = "lost-ids.txt"

// Clean reports whether Repair found nothing it could not read and lost
// nothing the store had acknowledged.
func (r *RepairReport) Clean() bool {
	return len(r.Damage) == 0 && r.LostCommits == 0 && len(r.LostIDs) == 0 && len(r.LostSeqRanges) == 0
}

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
	tail, losses, err := cutWALs(work, rep, log)
	if err != nil {
		return nil, fmt.Errorf("repair: %w", err)
	}
	out, err := newSink(ctx, fresh, rep, log)
	if err != nil {
		return nil, fmt.Errorf("repair: create the repaired store: %w", err)
	}
	out.watch(losses, mark)
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
	out.name(losses)
	if len(rep.LostIDs) > 0 {
		if err := writeLostIDs(filepath.Join(fresh, lostIDsName), rep.LostIDs); err != nil {
			_ = os.RemoveAll(fresh)
			return nil, fmt.Errorf("repair: write the lost job ids: %w", err)
		}
		rep.LostIDsFile = filepath.Join(dir, lostIDsName)
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
// records after that point, to be applied once Pebble has opened, and
// what the cuts lose (walLoss), for the sink to name.
//
// Only the newest WAL can end in a torn tail (a write cut short by the
// crash, never acknowledged): Pebble closes every older WAL with a
// trailer before it starts the next, and replays an older one strictly.
// So in an older WAL an unreadable stretch, torn-looking or not, and an
// end without the trailer are damage: the records there were
// acknowledged.
func cutWALs(work string, rep *RepairReport, log *slog.Logger) ([]walRecord, *walLosses, error) {
	logs, err := wal.Scan(wal.Dir{FS: vfs.Default, Dirname: work})
	if err != nil {
		return nil, nil, fmt.Errorf("list WAL files: %w", err)
	}
	type walFile struct {
		name, path string
		size       int
		recs       []walRecord
		first      int       // where the damage starts; -1: none
		spans      []walSpan // damaged stretches (not the newest WAL's torn tail)
	}
	var files []walFile
	for i, ll := range logs {
		older := i < len(logs)-1
		for seg := range ll.NumSegments() {
			_, path := ll.SegmentLocation(seg)
			b, err := os.ReadFile(path)
			if err != nil {
				return nil, nil, err
			}
			name := filepath.Base(path)
			recs, bad, first, clean := salvageWAL(b, uint32(ll.Num))
			f := walFile{name: name, path: path, size: len(b), recs: recs, first: first}
			for _, sp := range bad {
				if sp.torn && !older {
					log.Info("repair: torn tail of the newest WAL (a write cut short by the crash, never acknowledged)", "file", name, "from", sp.from, "to", sp.to)
					continue
				}
				sp.torn = false
				f.spans = append(f.spans, sp)
				if f.first < 0 || sp.from < f.first {
					f.first = sp.from
				}
			}
			if older && len(bad) == 0 && !clean {
				// Cut at a record's end: readable to there, but an older
				// WAL ends with the trailer of its close.
				end := walEnd(recs)
				f.spans = append(f.spans, walSpan{from: end, to: len(b), cut: true})
				f.first = end
			}
			files = append(files, f)
		}
	}
	losses := &walLosses{ids: map[string]bool{}}
	var tail []walRecord
	var run groupFacts // the last commit and seq read, in log order
	for fi, f := range files {
		newest := fi == len(files)-1
		for _, r := range f.recs {
			if f.first >= 0 && r.off > f.first {
				break
			}
			run.add(batchFacts(r.data))
		}
		if f.first < 0 {
			continue
		}
		var after []walRecord
		for _, r := range f.recs {
			if r.off > f.first {
				after = append(after, r)
			}
		}
		// What was lost lies between the last record read before the
		// damage and the first record after it that says where the log
		// had got to: in this WAL, or a newer one.
		var next groupFacts
		for _, r := range after {
			next.fill(batchFacts(r.data))
		}
		for _, g := range files[fi+1:] {
			for _, r := range g.recs {
				next.fill(batchFacts(r.data))
			}
		}
		for _, sp := range f.spans {
			l := walLoss{file: f.name, span: sp, prev: run, next: next}
			losses.spans = append(losses.spans, l)
			log.Warn("repair: unreadable WAL bytes of acknowledged writes", "file", f.name, "from", sp.from, "to", sp.to)
		}
		if newest {
			tail = after
			rep.WALRecords = len(after)
		} else if len(after) > 0 {
			// Not applied: a newer WAL, replayed first, would be
			// overwritten by their older writes. The jobs they wrote are
			// named unless the repaired store has them anyway.
			rep.LostWALRecords += len(after)
			for _, r := range after {
				for _, id := range batchFacts(r.data).ids {
					losses.ids[id] = true
				}
			}
			rep.Damage = append(rep.Damage, fmt.Sprintf("WAL %s: %d readable records after the damage not applied (an older WAL; newer ones were replayed first); the jobs they wrote that the repaired store lacks are named as lost", f.name, len(after)))
		}
		for _, r := range after {
			if !newest {
				break
			}
			run.add(batchFacts(r.data))
		}
		if err := os.Truncate(f.path, int64(f.first)); err != nil {
			return nil, nil, err
		}
		log.Info("repair: WAL cut at its first damage", "file", f.name, "offset", f.first, "records_after", len(after))
	}
	return tail, losses, nil
}

// groupFacts is what group commits say of how far the log had got: the
// commit number and the last job seq a batch carries (metaCommitKey,
// metaSeqKey), and the jobs whose records it writes.
type groupFacts struct {
	commit, seq       uint64
	hasCommit, hasSeq bool
	ids               []string
}

// add takes a later batch's facts as the newest.
func (g *groupFacts) add(f groupFacts) {
	if f.hasCommit {
		g.commit, g.hasCommit = f.commit, true
	}
	if f.hasSeq {
		g.seq, g.hasSeq = f.seq, true
	}
}

// fill takes f's facts where g has none yet (the first after a loss).
func (g *groupFacts) fill(f groupFacts) {
	if f.hasCommit && !g.hasCommit {
		g.commit, g.hasCommit = f.commit, true
	}
	if f.hasSeq && !g.hasSeq {
		g.seq, g.hasSeq = f.seq, true
	}
}

// batchFacts reads a WAL record (a batch) for its groupFacts; a batch
// that goes wrong part way gives what came before (see commitIn).
func batchFacts(repr []byte) groupFacts {
	var f groupFacts
	r := batchrepr.Read(repr)
	for entryFits(r) {
		kind, k, v, ok, err := r.Next()
		if !ok || err != nil {
			break
		}
		switch {
		case kind != pebble.InternalKeyKindSet:
		case bytes.Equal(k, metaCommitKey) && len(v) == 8:
			f.commit, f.hasCommit = binary.BigEndian.Uint64(v), true
		case bytes.Equal(k, metaSeqKey) && len(v) == 8:
			f.seq, f.hasSeq = binary.BigEndian.Uint64(v), true
		case len(k) > 1 && k[0] == prefixJob:
			f.ids = append(f.ids, string(k[1:]))
		}
	}
	return f
}

// walLoss is an unreadable stretch of acknowledged WAL records.
type walLoss struct {
	file       string
	span       walSpan
	prev, next groupFacts // the log before and after it
}

// walLosses is what cutWALs found lost: stretches, and the jobs written
// by readable records it could not apply.
type walLosses struct {
	spans []walLoss
	ids   map[string]bool
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
	damage := newDamageLog(log) // one line per damaged block
	damage.msg = "repair: damaged sstable block; reading around it"
	po.EventListener = &pebble.EventListener{DataCorruption: damage.corruption}
	db, err := openRecovering(work, po)
	// A table cut short fails Pebble's open (its size is not the one the
	// MANIFEST lists): padded back to that size with zeros in the work
	// copy, it opens, and its lost part reads as damaged blocks, which
	// the scans below get around. One table at a time.
	for range maxPaddedTables {
		num, disk, want, ok := sizeMismatch(err)
		if !ok {
			break
		}
		path := filepath.Join(work, num+".sst")
		if terr := os.Truncate(path, want); terr != nil {
			return fmt.Errorf("pad the cut table %s: %w", path, terr)
		}
		rep.Damage = append(rep.Damage, fmt.Sprintf("%s.sst: cut short at byte %d of %d: the keys in its missing part are unreadable", num, disk, want))
		log.Warn("repair: table cut short; reading what is left of it", "file", num+".sst", "size", disk, "manifest_size", want)
		db, err = openRecovering(work, po)
	}
	if err != nil {
		return fmt.Errorf("Pebble cannot open the store even with its WALs cut at the damage and its cut tables padded (%s); nothing was changed: %w", openBlame(err), err)
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
	// One line for the hole, naming each table whose damage bounds it
	// (the forward and the backward scan usually stop at the same block).
	var where []string
	for _, e := range []error{fwdErr, bwdErr} {
		if e == nil {
			continue
		}
		w := "an sstable"
		if f := sstableIn(e.Error(), ""); f != "" {
			w = f
		}
		if !slices.Contains(where, w) {
			where = append(where, w)
		}
	}
	rep.Damage = append(rep.Damage, fmt.Sprintf("%s: a damaged block hides the keys after %s and before %s (%v)",
		strings.Join(where, ", "), describeKey(lastFwd, "the first key"), describeKey(firstBwd, "the last key"), firstErr(fwdErr, bwdErr)))
	if r, ok := jobHole(lastFwd, firstBwd); ok {
		r.Where = strings.Join(where, ", ")
		rep.UnreadIDRanges = append(rep.UnreadIDRanges, r)
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
				out.lost(id)
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
		rep.Damage = append(rep.Damage, fmt.Sprintf("%d jobs named by the indexes have records in damaged blocks: lost, each named by id", unread))
	}
	return nil
}

// maxPaddedTables bounds the cut tables readStore pads before it gives up.
const maxPaddedTables = 1000

// sizeMismatchRE matches Pebble's refusal of a table whose size is not the
// MANIFEST's: "000008: object size mismatch (PATH): 4731 (disk) != 9462
// (MANIFEST)".
var sizeMismatchRE = regexp.MustCompile(`(\d{6,}): object size mismatch \(.*\): (\d+) \(disk\) != (\d+) \(MANIFEST\)`)

// sizeMismatch parses Pebble's open error for a table cut short: its
// number, its size on disk and the size the MANIFEST lists.
func sizeMismatch(err error) (num string, disk, want int64, ok bool) {
	if err == nil {
		return "", 0, 0, false
	}
	m := sizeMismatchRE.FindStringSubmatch(err.Error())
	if m == nil {
		return "", 0, 0, false
	}
	disk, err1 := strconv.ParseInt(m[2], 10, 64)
	want, err2 := strconv.ParseInt(m[3], 10, 64)
	if err1 != nil || err2 != nil || disk >= want {
		return "", 0, 0, false
	}
	return m[1], disk, want, true
}

// openBlame says which file an open failure of readStore points at.
func openBlame(err error) string {
	msg := err.Error()
	if f := sstableIn(msg, ""); f != "" {
		return "table " + f + " is damaged beyond what repair reads around"
	}
	if strings.Contains(msg, "MANIFEST") {
		return "the MANIFEST, Pebble's list of tables, is damaged"
	}
	return "see the error"
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
			k.lost(string(key[1:]))
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

	lostIDs  map[string]bool // jobs known by id to be lost
	watchIDs map[string]bool // jobs lost unless kept (from unapplied WAL records)
	keptIDs  map[string]bool // of watchIDs, those kept
	ranges   []LostSeqRange  // seqs lost with unreadable WAL bytes
	keptIn   []int           // by range: jobs kept with a seq in it
}

// lost names a job known to be lost.
func (k *sink) lost(id string) { k.lostIDs[id] = true }

// watch prepares the naming of what the WAL cuts lost: a seq range for
// each unreadable stretch, bounded by the log before and after it (or by
// the high-water mark m when nothing after it says), and the jobs of the
// records not applied.
func (k *sink) watch(l *walLosses, m *ackMark) {
	k.watchIDs = l.ids
	for _, sp := range l.spans {
		r := LostSeqRange{From: 1, Where: fmt.Sprintf("WAL %s %s", sp.file, sp.span)}
		if sp.prev.hasSeq {
			r.From = sp.prev.seq + 1
		}
		switch {
		case sp.next.hasSeq:
			r.To = sp.next.seq
		case m != nil:
			r.To = m.seq
		default:
			r.To = 0 // open: nothing after the damage says how far seqs went
		}
		commits := "commits after " + strconv.FormatUint(sp.prev.commit, 10)
		if sp.next.hasCommit {
			commits = fmt.Sprintf("commits %d-%d", sp.prev.commit+1, sp.next.commit-1)
		} else if m != nil && m.commit > sp.prev.commit {
			commits = fmt.Sprintf("commits %d-%d", sp.prev.commit+1, m.commit)
		}
		r.Where += ": acknowledged writes lost (" + commits + ")"
		k.ranges = append(k.ranges, r)
	}
	k.keptIn = make([]int, len(k.ranges))
}

// seen counts a kept job against the lost ranges and watched ids.
func (k *sink) seen(j *delayq.Job) {
	if k.watchIDs[j.ID] {
		k.keptIDs[j.ID] = true
	}
	for i, r := range k.ranges {
		if j.Seq >= r.From && (r.To == 0 || j.Seq <= r.To) {
			k.keptIn[i]++
		}
	}
}

// name fills the report's names of the lost jobs (see RepairReport).
func (k *sink) name(l *walLosses) {
	r := k.rep
	for id := range k.watchIDs {
		if !k.keptIDs[id] {
			k.lostIDs[id] = true
		}
	}
	r.LostIDs = slices.Sorted(maps.Keys(k.lostIDs))
	for i, lr := range k.ranges {
		seqs := fmt.Sprintf("job seqs from %d on", lr.From)
		if lr.To != 0 {
			if lr.To >= lr.From {
				lr.Missing = int(lr.To-lr.From+1) - k.keptIn[i]
			}
			seqs = fmt.Sprintf("job seqs %d-%d", lr.From, lr.To)
		}
		if lr.To == 0 || lr.To >= lr.From {
			r.LostSeqRanges = append(r.LostSeqRanges, lr)
		}
		r.Damage = append(r.Damage, fmt.Sprintf("%s; %s: the repaired store lacks %d of them (each lost, or deleted before the damage), and reserves, finishes and deletes there are undone", lr.Where, seqs, max(lr.Missing, 0)))
	}
	if r.LostSeqs > 0 {
		r.LostSeqRanges = append(r.LostSeqRanges, LostSeqRange{From: r.LostFromSeq, To: r.LostToSeq, Missing: int(r.LostSeqs), Where: "the log ends short of its high-water mark (" + ackMarkName + ")"})
	}
}

// writeLostIDs writes ids, one a line, into a new file at path.
func writeLostIDs(path string, ids []string) error {
	var b strings.Builder
	for _, id := range ids {
		b.WriteString(id)
		b.WriteByte('\n')
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// describeKey names a key of the store for a repair summary; what when
// k is nil (an open end).
func describeKey(k []byte, what string) string {
	switch {
	case k == nil:
		return what
	case k[0] == prefixJob:
		return fmt.Sprintf("the record of job %q", k[1:])
	case k[0] == prefixSeq && len(k) == 9:
		return fmt.Sprintf("the seq index entry of seq %d", binary.BigEndian.Uint64(k[1:]))
	}
	return fmt.Sprintf("key %q", k)
}

// jobHole is the range of job ids whose records lie in the hole between
// lastFwd and firstBwd (nil: open), if it holds any J key.
func jobHole(lastFwd, firstBwd []byte) (IDRange, bool) {
	var r IDRange
	if lastFwd != nil {
		switch {
		case lastFwd[0] > prefixJob:
			return r, false
		case lastFwd[0] == prefixJob:
			r.After = string(lastFwd[1:])
		}
	}
	if firstBwd != nil {
		switch {
		case firstBwd[0] < prefixJob:
			return r, false
		case firstBwd[0] == prefixJob:
			r.Before = string(firstBwd[1:])
		}
	}
	return r, true
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
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
	// Reported once, by LostCommits and LostSeqs (the CLI's "dropped:"
	// line), not again among the damage.
	k.log.Warn("repair: the log falls short of its acknowledged high-water mark", "lost_commits", r.LostCommits, "lost_seqs", r.LostSeqs)
	k.lastSeq = max(k.lastSeq, m.seq)
}

// newSink creates the fresh store at dir.
func newSink(ctx context.Context, dir string, rep *RepairReport, log *slog.Logger) (*sink, error) {
	s, err := Open(dir, Options{Logger: log, MinFree: -1, HotSize: -1})
	if err != nil {
		return nil, err
	}
	return &sink{ctx: ctx, s: s, rep: rep, log: log, progress: newProgress(log, "repair: writing jobs"), pauses: map[string]time.Time{}, overlays: map[string][]byte{},
		lostIDs: map[string]bool{}, watchIDs: map[string]bool{}, keptIDs: map[string]bool{}}, nil
}

// job adds a salvaged job, writing the batch when it is full.
func (k *sink) job(j *delayq.Job) error {
	k.seen(j)
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
