package diskstore

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"golang.org/x/sys/unix"

	"github.com/delayq/delayq"
)

// The ballast: headroom a full disk cannot take.
//
// The free-space floor (space.go) stops this store's own puts, but not
// another process, nor a floor set to 0; and a store whose disk is full
// cannot reopen for writes (Pebble flushes its log at open, readonly.go),
// so after a restart it could not even take the reserves, finishes and
// deletes that would let consumers drain it. So the store keeps a file of
// Options.Ballast bytes, BALLAST, in the data directory, with its blocks
// allocated, and gives that space back when the disk is full:
//
//   - at Open, when the free space is short of what a writable open
//     needs, the ballast is removed first, and the store opens for writes
//     if that made the room;
//   - while running, a write of Pebble's that fails with ENOSPC removes
//     the ballast and is retried once (Pebble's vfs.OnDiskFull), so the
//     store does not fail for want of space while the ballast lasts.
//
// While the ballast is not in place, a put needs the floor plus the
// ballast's size free: the released room is for the transitions that
// drain the store, not for more jobs. The store re-creates the ballast as
// soon as that much is free again (checked with the free space, at most
// every spaceCheckEvery), and puts are taken again once it is there.

// ballastName is the ballast file in the data directory.
const ballastName = "BALLAST"

// ballast is the store's ballast file. Its flags are atomics: the
// OnDiskFull callback runs inside a Pebble write, with Pebble's locks
// held and maybe the store's mutex too, and must take no lock.
type ballast struct {
	fs       vfs.FS // the unwrapped filesystem
	path     string
	size     int64       // 0: no ballast
	present  atomic.Bool // the file is there, whole
	creating atomic.Bool // a goroutine is creating it
	released atomic.Int64
}

// newBallast sees whether dir's ballast is there, whole.
func newBallast(fs vfs.FS, dir string, size int64) *ballast {
	b := &ballast{fs: fs, path: fs.PathJoin(dir, ballastName), size: max(size, 0)}
	if b.size == 0 {
		_ = fs.Remove(b.path) // one left from a run that had a ballast
		return b
	}
	if st, err := fs.Stat(b.path); err == nil && st.Size() == b.size {
		b.present.Store(true)
	}
	return b
}

// missing reports whether the store should have a ballast and has none.
func (b *ballast) missing() bool { return b.size > 0 && !b.present.Load() }

// release removes the ballast, giving its space back; it reports whether
// there was one. Takes no lock (see the type).
func (b *ballast) release() bool {
	if !b.present.Swap(false) {
		return false
	}
	if err := b.fs.Remove(b.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return false
	}
	b.released.Add(1)
	return true
}

// create writes the ballast with its blocks allocated (fallocate, or
// zeros where the filesystem has no fallocate), synced, under a temporary
// name renamed into place, so that a half-written one is never taken for
// whole.
func (b *ballast) create() error {
	tmp := b.path + ".tmp"
	f, err := b.fs.Create(tmp, vfs.WriteCategoryUnspecified)
	if err != nil {
		return err
	}
	err = allocate(f, b.size)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = b.fs.Rename(tmp, b.path)
	}
	if err != nil {
		_ = b.fs.Remove(tmp)
		return err
	}
	syncDirFS(b.fs, b.fs.PathDir(b.path))
	b.present.Store(true)
	return nil
}

// allocate gives f size bytes of allocated blocks: fallocate where the
// filesystem has it (no data written), else zeros.
func allocate(f vfs.File, size int64) error {
	if fd := f.Fd(); fd != vfs.InvalidFd {
		err := unix.Fallocate(int(fd), 0, 0, size)
		if err == nil || !errors.Is(err, unix.EOPNOTSUPP) {
			return err
		}
	}
	zeros := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(zeros)) {
		n := min(int64(len(zeros)), size-off)
		if _, err := f.Write(zeros[:n]); err != nil {
			return err
		}
	}
	return nil
}

// ballastFS wraps the filesystem Pebble writes through so that an ENOSPC
// releases the ballast and the write is retried once.
func (s *Store) ballastFS(fs vfs.FS) vfs.FS {
	if s.ballast.size == 0 {
		return fs
	}
	return vfs.OnDiskFull(fs, func() {
		if s.ballast.release() {
			s.log.Error("diskstore: the disk is full; released the ballast so that the store keeps working: new jobs are refused until space is freed, reserves, finishes and deletes still work",
				"ballast_mib", s.ballast.size>>20)
		}
	})
}

// ballastRoom is the free space at which the ballast is re-created and
// puts taken again: the floor plus the ballast, plus slack so that the
// two do not take turns.
func (s *Store) ballastRoom() uint64 {
	return s.space.floor + uint64(s.ballast.size) + ballastSlack
}

// ballastSlack is free space beyond the floor and the ballast asked for
// before re-creating it.
const ballastSlack = 1 << 20

// checkBallast refuses a put while the ballast is missing and the free
// space is short of ballastRoom; once it is not, it has the ballast
// re-created (in the background: allocating it may write its whole size)
// and refuses puts until it is there. Requires mu and a fresh s.space.
func (s *Store) checkBallast() error {
	if !s.ballast.missing() || s.space.err != nil {
		return nil // a statfs error is Health's to report, as for the floor
	}
	if s.space.bytes >= s.ballastRoom() && !s.closed && s.ballast.creating.CompareAndSwap(false, true) {
		s.bg.Add(1)
		go func() {
			defer s.bg.Done()
			defer s.ballast.creating.Store(false)
			start := time.Now()
			if err := s.ballast.create(); err != nil {
				s.log.Warn("diskstore: cannot re-create the ballast", "err", err)
				return
			}
			s.log.Info("diskstore: space is back; the ballast is in place again and new jobs are taken", "ballast_mib", s.ballast.size>>20, "took", time.Since(start).Round(time.Millisecond))
		}()
	}
	return fmt.Errorf("%w: the disk filled and the store released its %d MiB ballast so that reserves, finishes and deletes keep working; new jobs are refused until %d MiB is free on the data directory's filesystem (now %d MiB)",
		delayq.ErrDiskFull, s.ballast.size>>20, s.ballastRoom()>>20, s.space.bytes>>20)
}

// placeBallast creates the ballast at a writable Open when it is missing
// and the free space allows it without going below the floor.
func (s *Store) placeBallast() {
	if !s.ballast.missing() {
		return
	}
	free, err := s.space.free(s.dir)
	if err != nil || free < s.ballastRoom() {
		s.log.Warn("diskstore: no room for the ballast; it is created once there is, and new jobs are refused until then", "ballast_mib", s.ballast.size>>20, "free_mib", free>>20)
		return
	}
	if err := s.ballast.create(); err != nil {
		s.log.Warn("diskstore: cannot create the ballast", "err", err)
	}
}
