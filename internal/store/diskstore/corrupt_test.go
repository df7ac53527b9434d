package diskstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/wal"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// writeJobs puts n jobs one put at a time (one WAL record each) through
// the real store in dir and closes it. It returns their ids.
func writeJobs(t *testing.T, dir string, n int) []string {
	t.Helper()
	s := openAt(t, dir, Options{MinFree: -1})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%04d", i)
		if err := s.Put(t.Context(), []*delayq.Job{crashJob(ids[i], i%2 == 0)}); err != nil {
			t.Fatalf("Put(%s) = %v", ids[i], err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return ids
}

// newestWAL returns the path of the highest-numbered WAL file in dir.
func newestWAL(t *testing.T, dir string) string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var logs []string
	for _, e := range ents {
		if _, _, ok := wal.ParseLogFilename(e.Name()); ok {
			logs = append(logs, e.Name())
		}
	}
	if len(logs) == 0 {
		t.Fatalf("no WAL in %s", dir)
	}
	slices.Sort(logs)
	return filepath.Join(dir, logs[len(logs)-1])
}

// flipByte inverts the byte at off (negative: from the end) of path.
func flipByte(t *testing.T, path string, off int64) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if off < 0 {
		off += int64(len(b))
	}
	b[off] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return off
}

// TestWALByteFlip flips one byte of the newest WAL at several offsets
// and reopens: either every acknowledged job is there, or Open fails with
// a CorruptionError naming the file; never a silent loss.
func TestWALByteFlip(t *testing.T) {
	const n = 300
	for _, at := range []string{"start", "second-record", "middle", "last-block", "near-end", "end", "end-crashed", "last-byte-crashed"} {
		t.Run(at, func(t *testing.T) {
			crashed := strings.HasSuffix(at, "-crashed")
			dir := t.TempDir()
			ids := writeJobs(t, dir, n)
			path := newestWAL(t, dir)
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			size := fi.Size()
			off := map[string]int64{
				"start": 0, "second-record": 60, "middle": size / 2, "last-block": size - 5000,
				"near-end": size - 100, "end": size - 30,
				"end-crashed": size - 30, "last-byte-crashed": size - walRecyclableHdr - 1,
			}[at]
			flipByte(t, path, off)
			if crashed {
				// As a killed process leaves it: no trailer after the
				// last record, whose checksum alone shows the damage.
				b, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, noTrailer(b), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			s, err := Open(dir, Options{MinFree: -1})
			if err != nil {
				var ce *CorruptionError
				if !errors.As(err, &ce) || !errors.Is(err, delayq.ErrCorrupt) {
					t.Fatalf("Open after a flip at %d = %v, want a *CorruptionError", off, err)
				}
				if ce.File != path || ce.Offset < 0 || ce.Offset > off || !strings.Contains(err.Error(), fmt.Sprintf("%s at offset %d", filepath.Base(path), ce.Offset)) || !strings.Contains(err.Error(), "delayq repair") {
					t.Fatalf("Open after a flip at %d = %v, want it to name %s and delayq repair", off, err, path)
				}
				t.Logf("refused: %v", err)
				return
			}
			defer func() { _ = s.Close() }()
			var missing []string
			for _, id := range ids {
				if _, err := s.Get(t.Context(), delayq.Ref{ID: id}); err != nil {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				t.Fatalf("flip at %d of %d: Open succeeded but %d of %d acknowledged jobs are gone (first %s)", off, size, len(missing), n, missing[0])
			}
		})
	}
}

// TestWALTornTailAccepted cuts the newest WAL inside its last record, or
// pads it with zeros, as a crash while writing leaves it: Open accepts it
// and every record before the cut is there.
func TestWALTornTailAccepted(t *testing.T) {
	const n = 50
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
	}{
		{"cut-in-payload", func(b []byte) []byte { b = noTrailer(b); return b[:len(b)-40] }},
		{"cut-in-header", func(b []byte) []byte { b = noTrailer(b); return b[:len(b)-lastRecordLen(b)+5] }},
		{"zeros-after", func(b []byte) []byte { return append(noTrailer(b), make([]byte, 4096)...) }},
		{"zeroed-last", func(b []byte) []byte {
			b = noTrailer(b)
			clear(b[len(b)-lastRecordLen(b):])
			return b
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			ids := writeJobs(t, dir, n)
			path := newestWAL(t, dir)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, tc.edit(b), 0o644); err != nil {
				t.Fatal(err)
			}
			// A torn tail is a write the crash cut short, so it was
			// never acknowledged: the high-water mark (acked.go) stops
			// at the commit before it.
			unackLast(t, dir)
			s := openAt(t, dir, Options{MinFree: -1})
			defer func() { _ = s.Close() }()
			for _, id := range ids[:n-1] {
				if _, err := s.Get(t.Context(), delayq.Ref{ID: id}); err != nil {
					t.Fatalf("Get(%s) after a torn tail = %v, want the job", id, err)
				}
			}
		})
	}
}

// noTrailer drops the trailer a clean close writes at the end of a WAL,
// so b ends as the WAL of a killed process does.
func noTrailer(b []byte) []byte {
	if n := len(b) - walRecyclableHdr; n > 0 && parseWALChunk(b, n, walNum(b)).trailer {
		return b[:n]
	}
	panic("no WAL trailer")
}

// lastRecordLen is the length of the last chunk of a WAL written by
// writeJobs (every put is one single-chunk record) without its trailer.
func lastRecordLen(b []byte) int {
	for off := 0; off < len(b); {
		c := parseWALChunk(b, off, walNum(b))
		if c.end >= len(b) || !c.valid {
			return len(b) - off
		}
		off = c.end
	}
	return 0
}

// walNum is the log number in the first chunk header of b.
func walNum(b []byte) uint32 { return binary.LittleEndian.Uint32(b[7:]) }

// flushedStore writes n jobs, flushes them into an sstable and closes the
// store; it returns the ids and the sstable's path.
func flushedStore(t *testing.T, dir string, n int) ([]string, string) {
	t.Helper()
	s := openAt(t, dir, Options{MinFree: -1})
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%04d", i)
		if err := s.Put(t.Context(), []*delayq.Job{crashJob(ids[i], i%2 == 0)}); err != nil {
			t.Fatalf("Put(%s) = %v", ids[i], err)
		}
	}
	if err := s.db.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	ssts, err := filepath.Glob(filepath.Join(dir, "*.sst"))
	if err != nil || len(ssts) != 1 {
		t.Fatalf("sstables in %s: %v, %v; want one", dir, ssts, err)
	}
	return ids, ssts[0]
}

// TestCorruptSSTableNoPanic damages a block of the only sstable: one that
// Open reads (it then fails with a *CorruptionError naming the table) and
// one that only job reads touch (those reads fail with it, the server
// stays up and the other jobs stay readable). Before, Pebble's default
// handler panicked in both.
func TestCorruptSSTableNoPanic(t *testing.T) {
	t.Run("read-by-open", func(t *testing.T) {
		dir := t.TempDir()
		_, sst := flushedStore(t, dir, 300)
		flipByte(t, sst, 600) // the first data block: the counters (C keys) Open loads
		s, err := Open(dir, Options{MinFree: -1})
		if err == nil {
			_ = s.Close()
			t.Skip("the damaged block is not one Open reads")
		}
		var ce *CorruptionError
		if !errors.As(err, &ce) || filepath.Base(ce.File) != filepath.Base(sst) || !strings.Contains(err.Error(), "delayq repair") {
			t.Fatalf("Open with a damaged sstable = %v, want a *CorruptionError naming %s and delayq repair", err, filepath.Base(sst))
		}
	})
	t.Run("read-by-get", func(t *testing.T) {
		dir := t.TempDir()
		ids, sst := flushedStore(t, dir, 300)
		fi, err := os.Stat(sst)
		if err != nil {
			t.Fatal(err)
		}
		flipByte(t, sst, fi.Size()/3) // among the job records, which Open does not read
		s := openAt(t, dir, Options{MinFree: -1})
		defer func() { _ = s.Close() }()
		bad, good := 0, 0
		for _, id := range ids {
			_, err := s.Get(t.Context(), delayq.Ref{ID: id})
			switch {
			case err == nil:
				good++
			case errors.Is(err, delayq.ErrCorrupt) && errors.Is(err, delayq.ErrUnavailable) && strings.Contains(err.Error(), filepath.Base(sst)):
				bad++
			default:
				t.Fatalf("Get(%s) = %v, want the job or a corruption error naming %s", id, err, filepath.Base(sst))
			}
		}
		if bad == 0 || good == 0 {
			t.Fatalf("%d jobs readable, %d in the damaged block; want some of each", good, bad)
		}
	})
}

// openWithDamaged puts bad and good into a new store, damages bad's
// record on disk and reopens the store (records not kept in memory, so
// reads go to the damaged bytes). The store closes with the test.
func openWithDamaged(t *testing.T, bad, good *delayq.Job) *Store {
	t.Helper()
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	if err := s.Put(t.Context(), []*delayq.Job{bad, good}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	damageRecord(t, dir, bad.ID)
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestTickSkipsCorruptRecord: a due job whose record fails its checksum
// does not stop the timer; the other due job fires, the damaged one is
// reported by reads, and the next step does not meet it again.
func TestTickSkipsCorruptRecord(t *testing.T) {
	bad, good := crashJob("bad", true), crashJob("good", true)
	good.Due = bad.Due.Add(time.Second)
	s := openWithDamaged(t, bad, good)
	now := good.Due.Add(time.Hour)
	res, err := s.Tick(t.Context(), store.TickParams{Now: now})
	if err != nil || res.Ready["crash"] != 1 {
		t.Fatalf("Tick past both due times = %+v, %v; want the good job promoted and no error", res, err)
	}
	if j, err := s.Get(t.Context(), delayq.Ref{ID: "good"}); err != nil || j.State != delayq.StateReady {
		t.Fatalf("Get(good) = %+v, %v; want it ready", j, err)
	}
	if _, err := s.Get(t.Context(), delayq.Ref{ID: "bad"}); !errors.Is(err, delayq.ErrCorrupt) {
		t.Fatalf("Get(bad) = %v, want ErrCorrupt", err)
	}
	res, err = s.Tick(t.Context(), store.TickParams{Now: now})
	if err != nil || len(res.Ready) != 0 || !res.Next.IsZero() {
		t.Fatalf("second Tick = %+v, %v; want nothing due and nothing next", res, err)
	}
}

// TestReserveSkipsCorruptRecord: a ready job whose record fails its
// checksum, first in serving order, does not make every reserve of its
// topic fail; the next job is handed out.
func TestReserveSkipsCorruptRecord(t *testing.T) {
	bad, good := crashJob("bad", false), crashJob("good", false)
	bad.Priority = 1
	s := openWithDamaged(t, bad, good)
	jobs, err := s.Reserve(t.Context(), store.ReserveParams{Topics: []string{"crash"}, Max: 2, Now: t0})
	if err != nil || len(jobs) != 1 || jobs[0].ID != "good" {
		t.Fatalf("Reserve = %v, %v; want only the good job", jobs, err)
	}
	if _, err := s.Get(t.Context(), delayq.Ref{ID: "bad"}); !errors.Is(err, delayq.ErrCorrupt) {
		t.Fatalf("Get(bad) = %v, want ErrCorrupt", err)
	}
}

// damageRecord flips the last bit of a job's sealed record in the closed
// store in dir, below Pebble's checksums.
func damageRecord(t *testing.T, dir, id string) {
	t.Helper()
	db := rawDB(t, dir)
	v, closer, err := db.Get(jobKey(id))
	if err != nil {
		t.Fatal(err)
	}
	v = append([]byte(nil), v...)
	_ = closer.Close()
	v[len(v)-1] ^= 1
	if err := db.Set(jobKey(id), v, nil); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

// unackLast sets dir's acknowledged high-water mark back by one commit
// and one seq, as if the last put's fsync had never returned.
func unackLast(t *testing.T, dir string) {
	t.Helper()
	m, err := readAckMark(vfs.Default, dir)
	if err != nil || m == nil {
		t.Fatalf("ACKED = %v, %v", m, err)
	}
	m.commit--
	m.seq--
	if err := os.WriteFile(filepath.Join(dir, ackMarkName), m.encode(), 0o644); err != nil {
		t.Fatal(err)
	}
}
