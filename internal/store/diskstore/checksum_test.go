package diskstore

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestSealedRecordRoundTrip: a sealed record opens to the same job.
func TestSealedRecordRoundTrip(t *testing.T) {
	for _, j := range sampleJobs() {
		got, err := openRecord(sealRecord(nil, j))
		if err != nil {
			t.Fatalf("openRecord(sealRecord(%s)) = %v", j.ID, err)
		}
		if diff := cmp.Diff(j, got); diff != "" {
			t.Errorf("openRecord(sealRecord(%s)) differs (-want +got):\n%s", j.ID, diff)
		}
	}
}

// TestSealedRecordEveryFlip flips every bit of sealed records: each one
// is refused with errChecksum, never decoded into a job.
func TestSealedRecordEveryFlip(t *testing.T) {
	for _, j := range sampleJobs() {
		b := sealRecord(nil, j)
		for i := range b {
			for bit := range 8 {
				c := bytes.Clone(b)
				c[i] ^= 1 << bit
				if got, err := openRecord(c); !errors.Is(err, errChecksum) {
					t.Fatalf("openRecord(%s with byte %d bit %d flipped) = %+v, %v; want errChecksum", j.ID, i, bit, got, err)
				}
			}
		}
	}
	if _, err := openRecord([]byte{1, 2}); !errors.Is(err, errChecksum) {
		t.Errorf("openRecord(2 bytes) = %v, want errChecksum", err)
	}
}

// rawDB opens the store's Pebble database directly, to damage values
// the way a disk or a bug would, below Pebble's own checksums.
func rawDB(t *testing.T, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{Logger: pebbleLogger{l: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// TestDamagedRecordIsCorruptNotWrong writes a job, then replaces its
// record with one whose body byte is changed (a value Pebble accepts as
// good): Get fails with ErrCorrupt instead of returning the wrong body.
func TestDamagedRecordIsCorruptNotWrong(t *testing.T) {
	dir := t.TempDir()
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	j := crashJob("victim", true)
	j.Body = []byte("pay order 42")
	if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, dir)
	v, closer, err := db.Get(jobKey("victim"))
	if err != nil {
		t.Fatal(err)
	}
	v = bytes.Clone(v)
	_ = closer.Close()
	i := bytes.Index(v, []byte("42"))
	v[i] = '9' // "pay order 92": still a well-formed record
	if err := db.Set(jobKey("victim"), v, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1})
	defer func() { _ = s.Close() }()
	got, err := s.Get(t.Context(), delayq.Ref{ID: "victim"})
	if !errors.Is(err, delayq.ErrCorrupt) || !errors.Is(err, delayq.ErrUnavailable) {
		t.Fatalf("Get(damaged record) = %+v, %v; want ErrCorrupt (and ErrUnavailable)", got, err)
	}
	if !strings.Contains(err.Error(), "checksum") {
		t.Errorf("Get(damaged record) = %v, want it to say checksum", err)
	}
}

// FuzzOpenRecord: opening arbitrary bytes never panics, and whatever opens
// seals again to bytes that open to the same job.
func FuzzOpenRecord(f *testing.F) {
	for _, j := range sampleJobs() {
		f.Add(sealRecord(nil, j))
	}
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		j, err := openRecord(b)
		if err != nil {
			if !errors.Is(err, errCorrupt) {
				t.Fatalf("openRecord(%x) = %v, want an error wrapping errCorrupt", b, err)
			}
			return
		}
		again, err := openRecord(sealRecord(nil, j))
		if err != nil {
			t.Fatalf("openRecord(sealRecord(openRecord(%x))) = %v", b, err)
		}
		if diff := cmp.Diff(j, again); diff != "" {
			t.Fatalf("record %x does not round-trip (-first +second):\n%s", b, diff)
		}
	})
}

// copyV1Store copies testdata/v1store, a store of format version 1 written
// by this package before checksums (commit a5fbde4: 30 jobs in topics
// "orders" and "mail", some in an sstable and some only in the WAL, of
// every state), into a new directory.
func copyV1Store(t *testing.T) string {
	t.Helper()
	return copyTestdata(t, "v1store")
}

// v1Topics is what testdata/v1store holds.
var v1Topics = map[string][4]int{"mail": {5, 10, 0, 0}, "orders": {5, 8, 1, 1}} // delayed, ready, reserved, buried

// checkV1Jobs checks that the migrated store holds every job of the v1
// store, each readable, and every record sealed.
func checkV1Jobs(t *testing.T, s *Store) {
	t.Helper()
	sts, err := s.Topics(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][4]int{}
	for _, st := range sts {
		got[st.Name] = [4]int{st.Delayed, st.Ready, st.Reserved, st.Buried}
	}
	if diff := cmp.Diff(v1Topics, got); diff != "" {
		t.Fatalf("topics after migration differ (-want +got):\n%s", diff)
	}
	n := 0
	for topic := range v1Topics {
		l, err := s.List(t.Context(), store.ListParams{Topic: topic})
		if err != nil {
			t.Fatalf("List(%s) = %v", topic, err)
		}
		for _, j := range l.Jobs {
			if !strings.HasPrefix(string(j.Body), "body ") {
				t.Errorf("job %s body %q", j.ID, j.Body)
			}
			n++
		}
	}
	if n != 30 {
		t.Fatalf("%d jobs listed after migration, want 30", n)
	}
}

func TestMigrateV1Store(t *testing.T) {
	dir := copyV1Store(t)
	var logs bytes.Buffer
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	checkV1Jobs(t, s)
	if !strings.Contains(logs.String(), "migrated the store to format version 4") || !strings.Contains(logs.String(), "records_sealed=30") {
		t.Errorf("migration log = %q, want it to report 30 records sealed", logs.String())
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// Migrated once: the version is 2 and a second open migrates nothing.
	logs.Reset()
	s = openAt(t, dir, Options{MinFree: -1, HotSize: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() { _ = s.Close() }()
	checkV1Jobs(t, s)
	if strings.Contains(logs.String(), "migrat") {
		t.Errorf("second open logged %q, want no migration", logs.String())
	}
}

// TestMigrateV1Resumes seals some records of a v1 store by hand, as a
// migration cut short by a crash leaves it; Open finishes the job.
func TestMigrateV1Resumes(t *testing.T) {
	dir := copyV1Store(t)
	db := rawDB(t, dir)
	for _, id := range []string{"v1-00", "v1-01", "v1-07"} {
		v, closer, err := db.Get(jobKey(id))
		if err != nil {
			t.Fatal(err)
		}
		sealed := sealBytes(nil, v)
		_ = closer.Close()
		if err := db.Set(jobKey(id), sealed, pebble.Sync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	s := openAt(t, dir, Options{MinFree: -1, HotSize: -1, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	defer func() { _ = s.Close() }()
	checkV1Jobs(t, s)
	if !strings.Contains(logs.String(), "records_sealed=27 already_sealed=3") {
		t.Errorf("migration log = %q, want 27 sealed and 3 already sealed", logs.String())
	}
}

// TestMigrateV1RefusesDamagedRecord: a v1 record that does not decode is
// not sealed as good; Open fails with a *CorruptionError naming it and
// changes nothing.
func TestMigrateV1RefusesDamagedRecord(t *testing.T) {
	dir := copyV1Store(t)
	db := rawDB(t, dir)
	if err := db.Set(jobKey("v1-03"), []byte{1, 2, 3}, pebble.Sync); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(dir, Options{MinFree: -1})
	var ce *CorruptionError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), `"v1-03"`) || !strings.Contains(err.Error(), "delayq repair") {
		t.Fatalf("Open(v1 store with a damaged record) = %v, want a *CorruptionError naming v1-03", err)
	}
	db = rawDB(t, dir)
	defer func() { _ = db.Close() }()
	v, closer, err := db.Get(metaVersionKey)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = closer.Close() }()
	if !bytes.Equal(v, []byte{0, 0, 0, 1}) {
		t.Errorf("version after a refused migration = %x, want 1", v)
	}
}

// copyTestdata copies the store testdata/name into a new directory, so a
// test may open (and upgrade) it.
func copyTestdata(t *testing.T, name string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("testdata/"+name)); err != nil {
		t.Fatal(err)
	}
	return dir
}
