package diskstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/delayq/delayq"
)

// CorruptionError reports damaged data: the file and the byte offset of
// the first damage when known. It matches delayq.ErrCorrupt.
type CorruptionError struct {
	File   string // path of the damaged file; "" when Pebble did not say
	Offset int64  // byte offset of the damage in File; -1 when unknown
	Detail string // what is wrong
	Dir    string // the data directory, for the repair hint
}

func (e *CorruptionError) Error() string {
	where := e.File
	if where == "" {
		where = "the data directory"
	}
	if e.Offset >= 0 {
		where = fmt.Sprintf("%s at offset %d", where, e.Offset)
	}
	return fmt.Sprintf("corrupt data in %s: %s; the store will not serve it: stop the server and run `delayq repair %s` to salvage every readable job", where, e.Detail, e.dir())
}

// dir is the data directory for the repair hint.
func (e *CorruptionError) dir() string {
	if e.Dir != "" {
		return e.Dir
	}
	return "DIR"
}

// Unwrap makes every CorruptionError match delayq.ErrCorrupt.
func (e *CorruptionError) Unwrap() error { return delayq.ErrCorrupt }

// lockDir takes the data directory's lock before anything reads it, so the
// WAL check sees files no other process is writing. Pebble's Open then
// uses the same lock.
func lockDir(fs vfs.FS, dir string) (*pebble.Lock, error) {
	if err := fs.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	lock, err := pebble.LockDirectory(dir, fs)
	if err != nil {
		if locked(err) {
			return nil, fmt.Errorf("data directory %s is in use by another delayq server (its LOCK file is held): %w", dir, err)
		}
		return nil, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	return lock, nil
}

// openPebble checks the newest WAL and opens Pebble under lock. Damage
// Pebble finds itself (an older WAL, the MANIFEST, an sstable read during
// replay) becomes a *CorruptionError too, and so does a log that ends
// before the acknowledged high-water mark (acked.go): checked from the
// newest WAL's own records before Pebble touches it, else from what
// Pebble recovered. It returns the last commit number recovered.
func openPebble(dir string, opts Options, lock *pebble.Lock, readOnly bool) (db *pebble.DB, commit uint64, err error) {
	t0 := time.Now()
	mark := loadAckMark(opts.fsOrDefault(), dir, opts.Logger)
	tail, err := checkWAL(opts.fsOrDefault(), dir)
	tWAL := time.Since(t0)
	if err == nil && mark != nil && tail.found && tail.commit < mark.commit {
		err = shortLog(dir, tail.path, tail.end, tail.commit, mark)
	}
	if err != nil {
		if ce, ok := errors.AsType[*CorruptionError](err); ok {
			ce.Dir = dir
		}
		return nil, 0, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	cache := pebble.NewCache(opts.CacheSize)
	defer cache.Unref()
	po := pebbleOptions(opts, cache)
	po.Lock = lock
	po.ReadOnly = readOnly
	// Pebble's default answer to a damaged block is Logger.Fatalf, which
	// takes the server down at every start that touches it. Log it
	// instead: the read that met it fails with a *CorruptionError.
	// Once per damaged block, in one line (damage.go).
	damage := opts.damage
	if damage == nil {
		damage = newDamageLog(opts.Logger)
	}
	events := pebble.EventListener{DataCorruption: damage.corruption}
	// At debug, Pebble's flushes, compactions and stalls are logged too:
	// they explain a slow open or a slow commit.
	if opts.Logger.Enabled(context.Background(), slog.LevelDebug) {
		events = pebble.TeeEventListener(events, pebble.MakeLoggingEventListener(pebbleLogger{l: opts.Logger}))
	}
	if opts.pebbleEvents != nil {
		events = pebble.TeeEventListener(events, *opts.pebbleEvents)
	}
	var gate *gatedScheduler
	var bg *background
	if !readOnly {
		gate = newGatedScheduler()
		po.Experimental.CompactionScheduler = gate
		// A P for each flush and compaction (background.go).
		if bg = newBackground(opts.BackgroundP); bg != nil {
			events = pebble.TeeEventListener(events, bg.listener())
		}
		// Pebble does not unregister its scheduler when Open fails (or
		// panics, below); after a successful Open, DB.Close does, and
		// halt is then a no-op.
		defer func() {
			if err != nil {
				gate.halt()
			}
		}()
	}
	po.EventListener = &events
	// Pebble panics on some damage it meets while opening (its code says
	// so: "interspersed with panics"); a panic must not take the process
	// down with no word of which file is bad.
	defer func() {
		if r := recover(); r != nil {
			db, err = nil, fmt.Errorf("diskstore: open %s: %w", dir, pebbleCorruption(opts.fsOrDefault(), dir, fmt.Errorf("pebble panicked: %v", r)))
		}
	}()
	t1 := time.Now()
	db, err = pebble.Open(dir, po)
	tOpen := time.Since(t1)
	if bg != nil && err == nil {
		bg.armed.Store(true) // Open's own flush ends before the store serves: it takes no P
	}
	if opts.pebbleOpened != nil {
		opts.pebbleOpened()
	}
	if gate != nil && err == nil {
		gate.release()
	}
	if err != nil {
		if pebble.IsCorruptionError(err) {
			err = pebbleCorruption(opts.fsOrDefault(), dir, err)
		}
		return nil, 0, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	if commit, err = checkAcked(db, dir, tail.path, mark); err != nil {
		_ = db.Close()
		return nil, 0, fmt.Errorf("diskstore: open %s: %w", dir, err)
	}
	opts.Logger.Debug("diskstore: pebble opened", "wal_check", tWAL.Round(time.Microsecond), "pebble_open", tOpen.Round(time.Microsecond))
	return db, commit, nil
}

// pebbleCorruption wraps a corruption error of Pebble's as a
// *CorruptionError. Pebble's message does not name the WAL it was
// replaying, so when the error is about a WAL, the WALs are read again to
// find the damaged one and where; else the table its message names.
func pebbleCorruption(fs vfs.FS, dir string, err error) *CorruptionError {
	ce := &CorruptionError{Offset: -1, Detail: err.Error(), Dir: dir}
	if strings.Contains(err.Error(), "WAL") {
		if path, off := findDamagedWAL(fs, dir); path != "" {
			ce.File, ce.Offset = path, off
			return ce
		}
	}
	ce.File = sstableIn(err.Error(), dir)
	return ce
}

// findDamagedWAL returns the first WAL in dir, oldest first, with an
// unreadable stretch that is not the torn tail of the newest one, and the
// offset of its first damage; "" when none is.
func findDamagedWAL(fs vfs.FS, dir string) (string, int64) {
	logs, err := wal.Scan(wal.Dir{FS: fs, Dirname: dir})
	if err != nil {
		return "", -1
	}
	for i, ll := range logs {
		for seg := range ll.NumSegments() {
			_, path := ll.SegmentLocation(seg)
			f, err := fs.Open(path)
			if err != nil {
				continue
			}
			b, err := io.ReadAll(f)
			_ = f.Close()
			if err != nil {
				continue
			}
			recs, bad, first, clean := salvageWAL(b, uint32(ll.Num))
			if first >= 0 {
				return path, int64(first)
			}
			if i < len(logs)-1 && len(bad) > 0 {
				return path, int64(bad[0].from) // an older WAL must end cleanly
			}
			if i < len(logs)-1 && !clean {
				return path, int64(walEnd(recs)) // cut short at a record's end
			}
		}
	}
	return "", -1
}

// sstableRE finds an sstable's name in a Pebble error message:
// "000005.sst", "file 000005:", "backing file 000005 error" or "invalid
// table 000005".
var sstableRE = regexp.MustCompile(`\b(\d{6,})\.sst\b|\bfile (\d{6,})\b|\btable (\d{6,})\b`)

// sstableIn names the sstable a Pebble error message mentions, or "".
func sstableIn(msg, dir string) string {
	m := sstableRE.FindStringSubmatch(msg)
	switch {
	case m == nil:
		return ""
	case m[1] != "":
		return filepath.Join(dir, m[1]+".sst")
	case m[2] != "":
		return filepath.Join(dir, m[2]+".sst")
	default:
		return filepath.Join(dir, m[3]+".sst")
	}
}

// readErr wraps an error of a Pebble read: damage Pebble detected becomes
// a *CorruptionError naming the table (the read fails, the server stays
// up); anything else is an I/O failure. Both match ErrUnavailable, so a
// client is told the store failed and the log has the cause.
func readErr(op string, err error) error {
	if ce := asCorruption(err, ""); ce != nil {
		return fmt.Errorf("diskstore: %s: %w: %w", op, delayq.ErrUnavailable, ce)
	}
	return fmt.Errorf("diskstore: %s: %w: %w", op, delayq.ErrUnavailable, err)
}

// asCorruption returns err as a *CorruptionError when it reports damage:
// Pebble's corruption errors and this package's own (errCorrupt, a bad
// checksum); nil otherwise.
func asCorruption(err error, dir string) *CorruptionError {
	if ce, ok := errors.AsType[*CorruptionError](err); ok {
		return ce
	}
	if pebble.IsCorruptionError(err) || errors.Is(err, errCorrupt) {
		return &CorruptionError{File: sstableIn(err.Error(), dir), Offset: -1, Detail: err.Error(), Dir: dir}
	}
	return nil
}

// skipCorrupt leaves out of memory a due or ready job whose record cannot
// be read, so that it does not hold up every job after it: the timer and
// reserve would meet it first, and fail, at every call. Its keys stay on
// disk: reads of it keep failing with the CorruptionError, and `delayq
// repair` reports it. t must not restore it on abort. Requires mu.
func (s *Store) skipCorrupt(t *txn, e *entry, err error) {
	if n := len(t.popped); n > 0 && t.popped[n-1] == e {
		t.popped = t.popped[:n-1]
	}
	s.drop(e) // take left it in the maps; out of the queues already
	s.damage.record(e.id)
	s.log.Error("diskstore: skipping a job whose record cannot be read; stop the server and run `delayq repair` to salvage the store",
		"job", e.id, "seq", e.seq, "err", err)
}
