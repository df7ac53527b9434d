package diskstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq"
)

// seedWAL is the newest WAL of a small store written by this package,
// the fuzz targets' seed.
func seedWAL(f *testing.F) []byte {
	f.Helper()
	dir := f.TempDir()
	s, err := Open(dir, Options{MinFree: -1})
	if err != nil {
		f.Fatal(err)
	}
	for _, j := range sampleJobs() {
		if err := s.Put(f.Context(), []*delayq.Job{j.Clone()}); err != nil {
			f.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	logs, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil || len(logs) != 1 || filepath.Base(logs[0]) != "000002.log" {
		f.Fatalf("WALs of a new store: %v, %v; want 000002.log", logs, err)
	}
	b, err := os.ReadFile(logs[0])
	if err != nil {
		f.Fatal(err)
	}
	return b
}

// checkWALOf runs checkWAL on b as the only WAL (number 2) of an
// in-memory directory.
func checkWALOf(t testing.TB, b []byte) error {
	fs := vfs.NewMem()
	f, err := fs.Create("000002.log", vfs.WriteCategoryUnspecified)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, err = checkWAL(fs, "")
	return err
}

// FuzzCheckWAL: the WAL check and the repair's WAL reader never panic on
// any bytes; what they report lies inside the file and in order; and an
// intact WAL passes the check and salvages whole.
func FuzzCheckWAL(f *testing.F) {
	seed := seedWAL(f)
	f.Add(seed)
	f.Add(seed[:len(seed)/2])
	f.Add(append(append([]byte(nil), seed[:40]...), seed[60:]...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		if err := checkWALOf(t, b); err != nil {
			var ce *CorruptionError
			if errors.As(err, &ce) && (ce.Offset < 0 || ce.Offset > int64(len(b))) {
				t.Fatalf("checkWAL offset %d outside a %d-byte file", ce.Offset, len(b))
			}
		}
		recs, bad, first, _ := salvageWAL(b, 2)
		last := -1
		for _, r := range recs {
			if r.off <= last || r.off >= len(b) {
				t.Fatalf("record offsets out of order or range: %d after %d (len %d)", r.off, last, len(b))
			}
			last = r.off
		}
		for _, sp := range bad {
			if sp.from < 0 || sp.to > len(b) || sp.from >= sp.to {
				t.Fatalf("bad span %+v in a %d-byte file", sp, len(b))
			}
		}
		if first >= len(b) {
			t.Fatalf("first damage %d in a %d-byte file", first, len(b))
		}
	})
}

// TestIntactWALSalvagesWhole: every record of an intact WAL is salvaged
// and nothing is reported.
func TestIntactWALSalvagesWhole(t *testing.T) {
	dir := t.TempDir()
	writeJobs(t, dir, 300)
	b, err := os.ReadFile(newestWAL(t, dir))
	if err != nil {
		t.Fatal(err)
	}
	recs, bad, first, _ := salvageWAL(b, walNum(b))
	// The version record, then one record per put.
	if len(recs) != 301 || len(bad) != 0 || first != -1 {
		t.Fatalf("salvageWAL(intact) = %d records, damage %v, first %d; want 301, none, -1", len(recs), bad, first)
	}
	if _, err := checkWAL(vfs.Default, dir); err != nil {
		t.Fatalf("checkWAL(intact) = %v", err)
	}
}

// TestFindDamagedWAL: of two WALs, the older one damaged in its middle
// is named with the offset of its damaged record; the newest one's torn
// tail alone names nothing.
func TestFindDamagedWAL(t *testing.T) {
	src := t.TempDir()
	writeJobs(t, src, 50)
	b, err := os.ReadFile(newestWAL(t, src))
	if err != nil {
		t.Fatal(err)
	}
	num := walNum(b)
	dir := t.TempDir()
	older := filepath.Join(dir, fmt.Sprintf("%06d.log", num))
	damaged := append([]byte(nil), b...)
	damaged[len(damaged)/2] ^= 0xff
	if err := os.WriteFile(older, damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	newer := filepath.Join(dir, fmt.Sprintf("%06d.log", num+2))
	if err := os.WriteFile(newer, []byte{1, 2, 3}, 0o644); err != nil {
		t.Fatal(err)
	}
	path, off := findDamagedWAL(vfs.Default, dir)
	if path != older || off <= 0 || off > int64(len(b)/2) {
		t.Fatalf("findDamagedWAL = %s, %d; want %s at the record holding byte %d", path, off, older, len(b)/2)
	}
	if err := os.Remove(older); err != nil {
		t.Fatal(err)
	}
	if path, _ := findDamagedWAL(vfs.Default, dir); path != "" {
		t.Fatalf("findDamagedWAL(only a torn newest WAL) = %s, want none", path)
	}
}
