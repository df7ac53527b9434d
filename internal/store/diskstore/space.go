package diskstore

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/delayq/delayq"
)

// The free-space floor. Pebble cannot take back a write it failed to log:
// once its WAL hits ENOSPC the store must fail whole (memory would be
// ahead of the disk). So the store refuses new jobs while the disk's free
// space is below MinFree, long before that can happen, and keeps serving
// reserves, finishes and deletes, which write little and let compactions
// give space back. The check reads statfs at most every spaceCheckEvery;
// once space returns, puts are taken again without a restart.

// spaceCheckEvery bounds how stale the free-space figure a put sees is.
const spaceCheckEvery = 250 * time.Millisecond

// statfsFree returns the bytes available to this process on dir's
// filesystem.
func statfsFree(dir string) (uint64, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

// space is the cached free-space check. Guarded by the store mutex.
type space struct {
	floor   uint64
	free    func(dir string) (uint64, error)
	checked time.Time
	bytes   uint64 // free bytes at checked
	// releases is the ballast's release count at checked.
	releases int64
	err      error // statfs error at checked
}

// checkPut refuses a put while free space is below the floor. Requires mu.
func (s *Store) checkPut() error {
	if s.space.floor == 0 && s.ballast.size == 0 {
		return nil
	}
	s.refreshSpace(time.Now())
	if s.space.err == nil && s.space.bytes < s.space.floor {
		return fmt.Errorf("%w: %d MiB free on the data directory's filesystem, below the floor of %d MiB (--min-free-mib); reserves, finishes and deletes still work",
			delayq.ErrDiskFull, s.space.bytes>>20, s.space.floor>>20)
	}
	return s.checkBallast()
}

// refreshSpace reads statfs again if the last figure is older than
// spaceCheckEvery. A statfs error is logged by Health, not fatal: the
// floor is a safety margin, not the store's correctness. Requires mu.
func (s *Store) refreshSpace(now time.Time) {
	// A ballast released since the last look (by a write that met
	// ENOSPC) makes the figure stale at once: the next put must see it.
	released := s.ballast.released.Load()
	if now.Sub(s.space.checked) < spaceCheckEvery && released == s.space.releases {
		return
	}
	s.space.releases = released
	s.space.checked = now
	s.space.bytes, s.space.err = s.space.free(s.dir)
}

// Health implements store.Healther: why the store is degraded (below its
// free-space floor, failed, or holding damage a read met: damage.go), or
// "" when it is well.
func (s *Store) Health() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.failed != nil {
		return s.publicReason(s.failed)
	}
	if s.closed {
		return errClosed.Error()
	}
	if s.readOnly != nil {
		return s.readOnly.Error()
	}
	if err := s.checkPut(); err != nil {
		return err.Error()
	}
	if s.space.err != nil {
		return "cannot read the free space of the data directory: " + s.space.err.Error()
	}
	return s.damage.health()
}

// publicReason is a failure as Health tells it: /healthz is public, so it
// names no file. Pebble's errors name the file they failed on, under the
// data directory, so the directory is cut out of the message; running
// out of space gets a sentence of its own. The server log has the
// original.
func (s *Store) publicReason(err error) string {
	if errors.Is(err, syscall.ENOSPC) {
		return "out of disk space while writing: the store takes no calls until it has reopened from disk, read-only within a second and for writes once space is freed"
	}
	msg := err.Error()
	for _, d := range []string{s.dir, filepath.Clean(s.dir)} {
		if d != "" && d != "." {
			msg = strings.ReplaceAll(msg, d, "<data dir>")
		}
	}
	return msg
}
