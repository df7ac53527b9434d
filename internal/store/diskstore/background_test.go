package diskstore

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
)

// TestBackgroundWorkGetsAP: with BackgroundP, GOMAXPROCS is one more for
// each flush and compaction Pebble runs after Open, the flush inside
// Open takes none, and GOMAXPROCS is as it was once they end.
func TestBackgroundWorkGetsAP(t *testing.T) {
	dir := t.TempDir()
	writeCompactionDebt(t, dir)
	type table struct {
		reason string
		opened bool // created after pebble.Open returned
		procs  int  // GOMAXPROCS then
	}
	var (
		mu        sync.Mutex
		opened    bool
		tables    []table
		compacted = make(chan struct{}, 16)
	)
	procs := runtime.GOMAXPROCS(0)
	events := &pebble.EventListener{
		// Pebble calls it while the job that created the table runs.
		TableCreated: func(info pebble.TableCreateInfo) {
			p := runtime.GOMAXPROCS(0)
			mu.Lock()
			defer mu.Unlock()
			tables = append(tables, table{info.Reason, opened, p})
		},
		CompactionEnd: func(pebble.CompactionInfo) { compacted <- struct{}{} },
	}
	db := openLocked(t, dir, Options{BackgroundP: true, pebbleEvents: events, pebbleOpened: func() {
		mu.Lock()
		defer mu.Unlock()
		opened = true
	}})
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
	if tables[0].procs != procs {
		t.Errorf("the flush inside Open ran with GOMAXPROCS %d, want %d", tables[0].procs, procs)
	}
	after := map[string]int{}
	for _, tb := range tables {
		if !tb.opened {
			continue
		}
		after[tb.reason]++
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
}
