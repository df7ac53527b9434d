package diskstore

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/cockroachdb/pebble/v2"
)

// checkpointDir is where Backup builds its checkpoints, inside the data
// directory so Pebble can hard-link the tables instead of copying them.
// Pebble ignores directories it did not create.
const checkpointDir = "checkpoints"

// Backup writes a consistent copy of the store, taken while it serves, to
// w as a tar archive of a Pebble checkpoint: every transition applied
// before the call is in it. Extracted into an empty directory, the archive
// is a data directory that Open (and `delayq serve --data-dir`) takes as
// it is.
func (s *Store) Backup(ctx context.Context, w io.Writer) error {
	return s.outside(ctx, false, func() error {
		s.mu.Lock()
		s.flushLocked() // the checkpoint then holds every transition applied so far
		s.mu.Unlock()
		parent := filepath.Join(s.dir, checkpointDir)
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return unavailable("backup", err)
		}
		tmp, err := os.MkdirTemp(parent, "backup-")
		if err != nil {
			return unavailable("backup", err)
		}
		defer os.RemoveAll(tmp)
		cp := filepath.Join(tmp, "cp")
		if err := s.db.Checkpoint(cp, pebble.WithFlushedWAL()); err != nil {
			return unavailable("backup checkpoint", err)
		}
		return writeTar(ctx, w, cp)
	})
}

// writeTar writes the regular files under dir to w, named relative to it.
func writeTar(ctx context.Context, w io.Writer, dir string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if err := tw.WriteHeader(&tar.Header{Name: filepath.ToSlash(rel), Mode: 0o644, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
			return err
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	return tw.Close()
}
