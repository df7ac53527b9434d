package cli

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// backupCmd is `delayq backup DIR`: a consistent copy of a running
// server's embedded store, written as a data directory that `delayq serve
// --data-dir DIR` opens as it is.
type backupCmd struct {
	clientFlags
	Dir string `arg:"" help:"Directory to write the backup into; must not exist or be empty."`
}

// Run streams the server's archive into Dir, refusing anything in it that
// would land outside Dir.
func (c *backupCmd) Run(e *env) error {
	if err := emptyDir(c.Dir); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := cl.Backup(e.ctx, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	files, size, err := untar(pr, c.Dir)
	pr.CloseWithError(err)
	if berr := <-done; berr != nil {
		return fmt.Errorf("backup: %w", berr)
	}
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	fmt.Fprintf(e.stdout, "backup written to %s: %s, %s\n", c.Dir, plural(files, "file", "files"), humanBytes(size))
	return nil
}

// emptyDir creates dir, or accepts it if it exists and is empty.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case err != nil:
		return err
	case len(entries) > 0:
		return usageError{msg: fmt.Sprintf("%s is not empty: a backup goes into a new or empty directory", dir)}
	}
	return nil
}

// untar extracts the regular files of a tar stream into dir.
func untar(r io.Reader, dir string) (files int, size int64, err error) {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, size, nil
		}
		if err != nil {
			return files, size, fmt.Errorf("read archive: %w", err)
		}
		name := filepath.FromSlash(h.Name)
		if h.Typeflag != tar.TypeReg || !filepath.IsLocal(name) {
			return files, size, fmt.Errorf("archive entry %q is not a plain file inside the backup", h.Name)
		}
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return files, size, err
		}
		f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			return files, size, err
		}
		n, err := io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, size, fmt.Errorf("write %s: %w", path, err)
		}
		files++
		size += n
	}
}

// humanBytes is n in the largest unit that keeps it at least 1.
func humanBytes(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	f, i := float64(n), 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	return strings.TrimSuffix(fmt.Sprintf("%.1f", f), ".0") + " " + units[i]
}
