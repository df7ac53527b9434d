package diskstore

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// The fsync window (--fsync DURATION).
//
// By default every group commit waits for the WAL's fdatasync before its
// transitions return. With Options.SyncEvery > 0 a group returns as soon
// as its WAL record has been written to the operating system (write(2)
// has returned), and the WAL is fdatasynced at least every SyncEvery by
// a background loop. A kill -9 of the process loses nothing acknowledged,
// since the kernel holds every written page; a power loss or a kernel
// crash loses at most the last SyncEvery of acknowledged transitions.
// That is the promise of beanstalkd's -f and of Redis's appendfsync
// everysec, with the window chosen by the operator.
//
// It is built below Pebble, in the filesystem Pebble writes through, so
// the commit path, the WAL format and recovery are the ones of the
// default mode: the WAL's Sync becomes "mark dirty, return", and the loop
// makes the real sync. Only WAL files (*.log) are deferred; sstables, the
// MANIFEST and directories keep Pebble's own syncs, so a flush or a
// compaction is as durable as before. A WAL file is synced for real
// before it is closed, so a rotated log never leaves the window with
// unsynced data the loop can no longer reach.
//
// The default mode (--fsync always) uses the same filesystem without the
// loop: the store syncs the WAL itself right after each group's write,
// so that syncs can overlap (commit.go, "overlapping syncs").

// lazyWALFS is a vfs.FS whose WAL files defer their syncs: to a loop
// (every > 0, the fsync window), or to the store, which syncs them itself
// once a group is written (every == 0, --fsync always: see syncOpen and
// "overlapping syncs" in commit.go).
type lazyWALFS struct {
	vfs.FS
	every time.Duration
	log   *slog.Logger

	mu    sync.Mutex
	dirty map[*lazyWALFile]bool // WAL files written since their last real sync (window only)
	open  map[*lazyWALFile]bool // WAL files not closed yet
	err   error                 // the first failed background sync, returned by every later Sync
	stop  chan struct{}
	done  chan struct{}
	// started is set by start before the loop runs; read by close in
	// the goroutine that called start (Open, then Close).
	started   bool
	closeOnce sync.Once
	// round, when set, is called before each sync round; the func it
	// returns is called once the round has synced every file it took
	// (the high-water mark, acked.go). Set before the first commit.
	round func() func()
	// rounds counts the sync rounds ended (tests wait on it).
	rounds atomic.Uint64
}

// newLazyWALFS wraps fs. Its sync loop starts with start, once the store
// the round hook reads is fully built; close stops it after a last sync.
func newLazyWALFS(fs vfs.FS, every time.Duration, log *slog.Logger) *lazyWALFS {
	return &lazyWALFS{FS: fs, every: every, log: log, dirty: make(map[*lazyWALFile]bool),
		open: make(map[*lazyWALFile]bool), stop: make(chan struct{}), done: make(chan struct{})}
}

// start sets the round hook and starts the sync loop. The go statement
// orders everything the caller built before it ahead of the loop's reads.
func (l *lazyWALFS) start(round func() func()) {
	l.round = round
	l.started = true
	go l.loop()
}

func isWAL(name string) bool { return strings.HasSuffix(name, ".log") }

// Create wraps a new WAL file.
func (l *lazyWALFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := l.FS.Create(name, c)
	if err != nil || !isWAL(name) {
		return f, err
	}
	return l.wrap(f), nil
}

// wrap makes f a WAL file of l.
func (l *lazyWALFS) wrap(f vfs.File) *lazyWALFile {
	w := &lazyWALFile{File: f, fs: l}
	l.mu.Lock()
	l.open[w] = true
	l.mu.Unlock()
	return w
}

// ReuseForWrite wraps a recycled WAL file.
func (l *lazyWALFS) ReuseForWrite(oldname, newname string, c vfs.DiskWriteCategory) (vfs.File, error) {
	f, err := l.FS.ReuseForWrite(oldname, newname, c)
	if err != nil || !isWAL(newname) {
		return f, err
	}
	return l.wrap(f), nil
}

// Unwrap returns the filesystem below.
func (l *lazyWALFS) Unwrap() vfs.FS { return l.FS }

func (l *lazyWALFS) loop() {
	defer close(l.done)
	t := time.NewTicker(l.every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			l.syncAll()
		case <-l.stop:
			l.syncAll()
			return
		}
	}
}

// syncAll makes the real sync of every dirty WAL file. A file is taken
// off the dirty set before its sync, so a write during the sync marks it
// again and the next round covers it.
func (l *lazyWALFS) syncAll() {
	var synced func()
	if l.round != nil {
		synced = l.round()
	}
	ok := true
	l.mu.Lock()
	files := make([]*lazyWALFile, 0, len(l.dirty))
	for f := range l.dirty {
		files = append(files, f)
		delete(l.dirty, f)
	}
	l.mu.Unlock()
	for _, f := range files {
		if err := f.realSync(); err != nil {
			ok = false
			l.setErr(err, "diskstore: background WAL sync failed; the store stops taking transitions")
		}
	}
	if ok && synced != nil {
		synced()
	}
	l.rounds.Add(1)
}

// setErr keeps the first sync error, which every later Sync returns:
// after a failed fdatasync the kernel may have dropped the dirty pages,
// so no later sync can be trusted to cover them.
func (l *lazyWALFS) setErr(err error, msg string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		l.log.Error(msg, "err", err)
	}
}

// syncOpen fdatasyncs every WAL file not closed yet, and returns once
// all are synced: everything written to any WAL before the call is then
// durable (a file closed before the call was synced by its Close, and a
// file closing during it is waited for; see lazyWALFile.Close). Several
// calls may run at once: each is its own fdatasync, and the kernel merges
// what it can. It is the --fsync always mode's sync (commit.go).
func (l *lazyWALFS) syncOpen() error {
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return l.err
	}
	files := make([]*lazyWALFile, 0, len(l.open))
	for f := range l.open {
		files = append(files, f)
	}
	l.mu.Unlock()
	for _, f := range files {
		if err := f.realSync(); err != nil {
			l.setErr(err, "diskstore: WAL sync failed; the store stops taking transitions")
			return err
		}
	}
	return nil
}

// failed is the first background sync error: once one failed, written
// data may never reach the disk, so every later commit fails with it and
// the store stops, as it does when a synchronous fsync fails.
func (l *lazyWALFS) failed() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *lazyWALFS) close() {
	l.closeOnce.Do(func() {
		if !l.started { // Open failed before the loop ran: sync here
			l.syncAll()
			return
		}
		close(l.stop)
		<-l.done
	})
}

// lazyWALFile is a WAL file whose Sync returns once the data is written
// to the operating system, leaving the fdatasync to the loop or the
// store.
type lazyWALFile struct {
	vfs.File
	fs *lazyWALFS
	// mu is held for reading by real syncs, which may overlap, and for
	// writing by Close, so that a sync never meets a closed descriptor
	// and waits for the sync Close makes.
	mu sync.RWMutex
}

// Sync marks the file for the next background sync. Pebble calls it
// after writing the record, so the data is in the kernel already.
func (f *lazyWALFile) Sync() error {
	if err := f.fs.failed(); err != nil {
		return err
	}
	if f.fs.every == 0 { // the store syncs every open file itself
		return nil
	}
	f.fs.mu.Lock()
	f.fs.dirty[f] = true
	f.fs.mu.Unlock()
	return nil
}

// SyncData is Sync: Pebble's syncing file calls SyncData for a WAL sync.
func (f *lazyWALFile) SyncData() error { return f.Sync() }

// realSync fdatasyncs the file; nil once Close has (Close synced it).
func (f *lazyWALFile) realSync() error {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if f.File == nil {
		return nil
	}
	return f.File.SyncData()
}

// Close syncs the file for real first: once closed, nobody else can. The
// file leaves the dirty and open sets only after that sync, so a sync
// round that runs meanwhile either takes the file and waits for Close
// (mu), or finds it gone because it is already synced.
func (f *lazyWALFile) Close() error {
	f.mu.Lock()
	var err error
	if f.File != nil {
		err = f.File.SyncData()
		if cerr := f.File.Close(); err == nil {
			err = cerr
		}
		f.File = nil
	}
	f.mu.Unlock()
	f.fs.mu.Lock()
	delete(f.fs.dirty, f)
	delete(f.fs.open, f)
	f.fs.mu.Unlock()
	return err
}

// closeIfAny stops the loop of a non-nil l.
func (l *lazyWALFS) closeIfAny() {
	if l != nil {
		l.close()
	}
}
