package diskstore

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Known damage.
//
// A damaged table block fails every read that meets it, and Pebble tells
// the store each time (its DataCorruption event), with an error whose
// detailed form holds several KB of stack traces. damageLog logs each
// damaged block once, in one line at error level (the stack trace at
// debug level), and remembers that the store holds damage, so that Health
// reports the store degraded (/healthz) from the first damaged read on,
// not only when a client's call fails.

// maxDamageKept bounds the blocks damageLog tells apart; past it every
// further one is only counted.
const maxDamageKept = 1000

// damageLog is what the store knows of its damage.
type damageLog struct {
	log *slog.Logger
	msg string // the line logged once per damaged block

	mu     sync.Mutex
	seen   map[string]bool // file and first line of the error, per damaged block
	blocks int             // damaged blocks (or records) met
	first  string          // the first one, for Health: file name and what
}

func newDamageLog(log *slog.Logger) *damageLog {
	return &damageLog{log: log, seen: make(map[string]bool),
		msg: "diskstore: corrupt data; reads that meet it fail: stop the server and run `delayq repair` on its data directory to salvage every readable job"}
}

// corruption is Pebble's DataCorruption event.
func (d *damageLog) corruption(info pebble.DataCorruptionInfo) {
	what := "damaged data"
	if info.Details != nil {
		what, _, _ = strings.Cut(info.Details.Error(), "\n")
	}
	if !d.note(filepath.Base(info.Path), what) {
		return
	}
	d.log.Error(d.msg, "file", info.Path, "detail", what)
	d.log.Debug("diskstore: corrupt data, Pebble's detail", "file", info.Path, "detail", fmt.Sprintf("%+v", info.Details))
}

// record notes a job record that fails its checksum or does not decode
// (skipCorrupt logs it).
func (d *damageLog) record(id string) {
	d.note("job record", fmt.Sprintf("%q", id))
}

// note records one damaged place; it reports whether it is new.
func (d *damageLog) note(file, what string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := file + "\x00" + what
	if d.seen[key] {
		return false
	}
	if len(d.seen) < maxDamageKept {
		d.seen[key] = true
	}
	d.blocks++
	if d.first == "" {
		d.first = file + ": " + what
	}
	return true
}

// health is Health's sentence for known damage; "" when none is known.
// It names no directory (/healthz is public), only a file's base name.
func (d *damageLog) health() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.blocks == 0 {
		return ""
	}
	return fmt.Sprintf("corrupt data found (%d damaged %s, the first in %s); reads that meet it fail: stop the server and run `delayq repair` on its data directory",
		d.blocks, plural(d.blocks, "block or record", "blocks or records"), d.first)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
