package diskstore

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// threadNice is the nice value of the calling goroutine's current
// thread (field 19 of /proc/thread-self/stat).
func threadNice(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/thread-self/stat")
	if err != nil {
		t.Fatal(err)
	}
	return statNice(t, b)
}

// statNice reads the nice value out of a /proc/.../stat line: the
// fields after the command's closing parenthesis start at field 3.
func statNice(t *testing.T, stat []byte) int {
	t.Helper()
	fields := bytes.Fields(stat[bytes.LastIndexByte(stat, ')')+1:])
	n, err := strconv.Atoi(string(fields[19-3]))
	if err != nil {
		t.Fatalf("stat %q: %v", stat, err)
	}
	return n
}

// lowThreads counts the process's threads at nice, but for the main
// thread: a goroutine that ends locked to it does not end it (Go cannot
// end a process's main thread) but parks it for good, so no goroutine
// runs on it again.
func lowThreads(t *testing.T, nice int) int {
	t.Helper()
	paths, err := filepath.Glob("/proc/self/task/*/stat")
	if err != nil {
		t.Fatal(err)
	}
	main := filepath.Join("/proc/self/task", strconv.Itoa(os.Getpid()), "stat")
	n := 0
	for _, p := range paths {
		if p == main {
			continue
		}
		if b, err := os.ReadFile(p); err == nil && statNice(t, b) == nice { // a thread may end meanwhile
			n++
		}
	}
	return n
}

// TestBackgroundWorkRunsAtLowPriority: with BackgroundNice, the flushes
// and compactions Pebble runs after Open create their tables on threads
// at that nice value, the flush inside Open and Open's caller keep their
// priority, and the lowered threads end with their work. With
// BackgroundP, GOMAXPROCS is one more for each such job while it runs,
// and as it was once they ended.
func TestBackgroundWorkRunsAtLowPriority(t *testing.T) {
	const nice = 19
	if n := lowThreads(t, nice); n != 0 {
		t.Fatalf("set-up: %d threads already at nice %d", n, nice)
	}
	dir := t.TempDir()
	writeCompactionDebt(t, dir)
	type table struct {
		reason string
		opened bool // created after pebble.Open returned
		nice   int
		procs  int // GOMAXPROCS then
	}
	procs := runtime.GOMAXPROCS(0)
	var (
		mu        sync.Mutex
		opened    bool
		tables    []table
		compacted = make(chan struct{}, 16)
	)
	events := &pebble.EventListener{
		// Pebble calls it on the goroutine that created the table,
		// right after the Create that lowered it.
		TableCreated: func(info pebble.TableCreateInfo) {
			n, p := threadNice(t), runtime.GOMAXPROCS(0)
			mu.Lock()
			defer mu.Unlock()
			tables = append(tables, table{info.Reason, opened, n, p})
		},
		CompactionEnd: func(pebble.CompactionInfo) { compacted <- struct{}{} },
	}
	opts := Options{BackgroundNice: nice, BackgroundP: true, pebbleEvents: events, pebbleOpened: func() {
		mu.Lock()
		defer mu.Unlock()
		opened = true
	}}
	db := openLocked(t, dir, opts)
	runtime.LockOSThread()
	if n := threadNice(t); n != 0 {
		t.Errorf("Open's caller runs at nice %d after Open, want 0", n)
	}
	runtime.UnlockOSThread()
	// A flush after Open; the gate lets the debt's compaction run.
	for i := range 100 {
		if err := db.Set(fmt.Appendf(nil, "K%03d", i), make([]byte, 100), pebble.NoSync); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-compacted:
	case <-time.After(time.Minute):
		t.Fatal("no compaction ended within a minute of Open")
	}
	if err := db.Close(); err != nil { // waits for the flushes and compactions
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(tables) == 0 || tables[0].opened || tables[0].reason != "flushing" {
		t.Fatalf("set-up: tables %+v: want Open's flush first", tables)
	}
	if tables[0].nice != 0 || tables[0].procs != procs {
		t.Errorf("the flush inside Open wrote at nice %d with GOMAXPROCS %d, want 0 and %d (Open may run it on its caller's goroutine)",
			tables[0].nice, tables[0].procs, procs)
	}
	after := map[string]int{}
	for _, tb := range tables {
		if !tb.opened {
			continue
		}
		after[tb.reason]++
		if tb.nice != nice {
			t.Errorf("a table %s after Open was written at nice %d, want %d", tb.reason, tb.nice, nice)
		}
		if tb.procs <= procs {
			t.Errorf("a table %s after Open was written with GOMAXPROCS %d, want more than %d", tb.reason, tb.procs, procs)
		}
	}
	if after["flushing"] == 0 || after["compacting"] == 0 {
		t.Fatalf("tables after Open by reason: %v, want a flush and a compaction", after)
	}
	if p := runtime.GOMAXPROCS(0); p != procs {
		t.Errorf("GOMAXPROCS is %d once every job ended, want %d as before", p, procs)
	}
	// Each lowered thread was locked to its goroutine, so it ends with it.
	deadline := time.Now().Add(30 * time.Second)
	for lowThreads(t, nice) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d threads still at nice %d 30 s after the store closed", lowThreads(t, nice), nice)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
