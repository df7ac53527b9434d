package diskstore

import (
	"sync/atomic"

	"github.com/cockroachdb/pebble/v2/vfs"
)

// Background work at low priority.
//
// Pebble flushes a full memtable and compacts L0 in goroutines of their
// own, and each holds a CPU for about half a second (a 64 MiB memtable
// here). On two cores that is half the machine: while it ran, the
// requests and the timer got one core, fewer jobs were served than came
// due, and the queue's age grew into the lateness tail of aim 4 of issue
// 17 (a job due during a flush was 10 to 230 ms late, every one of them;
// docs/benchmarks.md). The flush need not finish in half a second, and
// the requests must not wait for it.
//
// So a flush or compaction lowers the OS scheduling priority (the nice
// value) of the thread it runs on when it creates its first output
// table, and keeps that thread to itself (runtime.LockOSThread) so that
// no other goroutine inherits the priority. When the goroutine ends, Go
// ends its locked thread with it. The runtime creates new threads from a
// clean template thread when the creating one is locked, so the nice
// value never spreads. The kernel then runs the flush on whatever CPU the
// requests leave; RocksDB does the same to its compaction threads.
//
// A low-priority thread that the kernel leaves waiting still holds its
// Go P, so this only helps with a P to spare: the server gives the
// process one P more than it has CPUs (server.reserveBackgroundP). Only
// the goroutines Pebble starts after Open returns are lowered: Open
// itself may flush on its caller's goroutine.

// backgroundFS is the filesystem Pebble writes through, wrapped so that
// a flush or compaction lowers its thread's priority to nice as it
// creates an output table.
type backgroundFS struct {
	vfs.FS
	nice  int
	armed atomic.Bool // set once pebble.Open has returned
}

// Pebble's write categories of flush and compaction outputs (pebble
// v2.1.7, getDiskWriteCategoryForCompaction).
const (
	categoryFlush      vfs.DiskWriteCategory = "pebble-memtable-flush"
	categoryCompaction vfs.DiskWriteCategory = "pebble-compaction"
)

// lowerBackground wraps fs; nil when nice is 0 (nothing to lower).
func lowerBackground(fs vfs.FS, nice int) *backgroundFS {
	if nice == 0 {
		return nil
	}
	if fs == nil {
		fs = vfs.Default
	}
	return &backgroundFS{FS: fs, nice: nice}
}

// Create lowers the calling goroutine's thread when it is a flush or a
// compaction creating an output.
func (b *backgroundFS) Create(name string, c vfs.DiskWriteCategory) (vfs.File, error) {
	if (c == categoryFlush || c == categoryCompaction) && b.armed.Load() {
		lowerThread(b.nice)
	}
	return b.FS.Create(name, c)
}

// Unwrap gives the wrapped filesystem, as Pebble's own wrappers do.
func (b *backgroundFS) Unwrap() vfs.FS { return b.FS }
