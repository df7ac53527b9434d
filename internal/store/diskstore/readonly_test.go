package diskstore

import (
	"errors"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestReadOnlyStart opens a store on a filesystem reported to have no
// room for Pebble's opening flush: it opens read-only, serves reads,
// refuses every transition with ErrDiskFull and changes nothing, and once
// space returns its watcher reopens it for writes, with every job there.
func TestReadOnlyStart(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	s := openAt(t, dir, Options{})
	if err := s.Put(ctx, []*delayq.Job{crashJob("r", false), crashJob("d", true)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDoc(ctx, store.KindPolicy, &store.Doc{Name: "crash", Rev: 1, Data: []byte("{}")}, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	var free atomic.Uint64 // 0: a full disk
	s = openAt(t, dir, Options{freeBytes: func(string) (uint64, error) { return free.Load(), nil }})
	defer s.Close()
	if h := s.Health(); !strings.Contains(h, "reads only") || strings.Contains(h, dir) {
		t.Fatalf("Health() of a read-only start = %q, want it to say reads only and name no path", h)
	}
	if j, err := s.Get(ctx, delayq.Ref{ID: "d"}); err != nil || j.State != delayq.StateDelayed {
		t.Errorf("Get(d) read-only = %+v, %v", j, err)
	}
	if ts, err := s.Topics(ctx); err != nil || len(ts) != 1 || ts[0].Ready != 1 || ts[0].Delayed != 1 {
		t.Errorf("Topics() read-only = %+v, %v; want 1 ready, 1 delayed", ts, err)
	}
	if docs, err := s.ListDocs(ctx, store.KindPolicy); err != nil || len(docs) != 1 {
		t.Errorf("ListDocs() read-only = %d docs, %v; want 1", len(docs), err)
	}
	now := t0.Add(time.Minute)
	refused := []struct {
		name string
		call func() error
	}{
		{"Put", func() error { return s.Put(ctx, []*delayq.Job{crashJob("new", false)}) }},
		{"Reserve", func() error {
			_, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"crash"}, Max: 1, Now: now})
			return err
		}},
		{"Delete", func() error {
			_, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "r"}})
			return err
		}},
		{"Tick", func() error { _, err := s.Tick(ctx, store.TickParams{Now: t0.Add(48 * time.Hour)}); return err }},
		{"SaveDoc", func() error {
			return s.SaveDoc(ctx, store.KindPolicy, &store.Doc{Name: "x", Rev: 2, Data: []byte("{}")}, 0)
		}},
	}
	for _, r := range refused {
		if err := r.call(); !errors.Is(err, delayq.ErrDiskFull) {
			t.Errorf("%s on a read-only store = %v, want ErrDiskFull", r.name, err)
		}
	}
	if ts, _ := s.Topics(ctx); len(ts) != 1 || ts[0].Ready != 1 || ts[0].Delayed != 1 {
		t.Errorf("refused calls changed the store: %+v", ts)
	}

	free.Store(1 << 40)
	for deadline := time.Now().Add(10 * time.Second); s.Health() != ""; {
		if time.Now().After(deadline) {
			t.Fatalf("Health() = %q 10 s after space returned, want the store writable", s.Health())
		}
		time.Sleep(20 * time.Millisecond) // polling the observable state the watcher changes
	}
	if err := s.Put(ctx, []*delayq.Job{crashJob("new", false)}); err != nil {
		t.Fatalf("Put after the reopen = %v", err)
	}
	js, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"crash"}, Max: 10, Now: now})
	if err != nil || len(js) != 2 {
		t.Fatalf("Reserve after the reopen = %d jobs, %v; want r and new", len(js), err)
	}
	if res, err := s.Tick(ctx, store.TickParams{Now: t0.Add(48 * time.Hour)}); err != nil || res.Ready["crash"] != 3 || len(res.Lateness) != 1 {
		t.Errorf("Tick after the reopen = %+v, %v; want d made ready and both reservations expired", res, err)
	}
}

// TestPebbleErrorsRateLimited: a background job failing in a loop logs
// one line a second per message, and the next line counts those left out.
func TestPebbleErrorsRateLimited(t *testing.T) {
	var r errorRate
	at := time.Unix(1_900_000_000, 0)
	if ok, _ := r.allow("write %s: %v", at); !ok {
		t.Fatal("the first line was left out")
	}
	for i := range 2500 {
		if ok, _ := r.allow("write %s: %v", at.Add(time.Duration(i)*time.Millisecond/4)); ok {
			t.Fatalf("line %d within the second was logged", i)
		}
	}
	if ok, _ := r.allow("another %s", at); !ok {
		t.Error("a different message was held back by the first one's limit")
	}
	if ok, dropped := r.allow("write %s: %v", at.Add(time.Second)); !ok || dropped != 2500 {
		t.Errorf("a second later: logged %v with %d left out, want true and 2500", ok, dropped)
	}
}

// TestOutOfSpaceRecovers injects ENOSPC into Pebble's writes (the floor
// off, as if another process filled the disk faster than it could act):
// the put fails, the store says why, naming no path in what clients and
// /healthz see; within a second it serves reads again from disk (a
// failed store used to answer every call, gets too, as unavailable) and
// refuses transitions as disk full; once writes succeed again it reopens
// itself for writes with every acknowledged job and none of the failed
// one.
func TestOutOfSpaceRecovers(t *testing.T) {
	var full atomic.Bool
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && (op.Kind == errorfs.OpFileWrite || op.Kind == errorfs.OpFileWriteAt || op.Kind == errorfs.OpCreate) {
			return syscall.ENOSPC
		}
		return nil
	}))
	var free atomic.Uint64
	free.Store(1 << 40)
	dir := t.TempDir()
	s := openAt(t, dir, Options{fs: fs, MinFree: -1, freeBytes: func(string) (uint64, error) { return free.Load(), nil }})
	defer s.Close()
	ctx := t.Context()
	if err := s.Put(ctx, []*delayq.Job{crashJob("before", false)}); err != nil {
		t.Fatal(err)
	}
	full.Store(true)
	free.Store(0) // the watcher must wait for the space, not reopen at once
	err := s.Put(ctx, []*delayq.Job{crashJob("lost", false)})
	if !errors.Is(err, delayq.ErrUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Put on a full disk = %v, want ErrUnavailable for ENOSPC", err)
	}
	if msg := delayq.Message(err); strings.Contains(msg, dir) {
		t.Errorf("the client's message %q names the data directory", msg)
	}
	if h := s.Health(); h == "" || strings.Contains(h, dir) {
		t.Errorf("Health() while failed = %q, want the reason, naming no path", h)
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		_, err := s.Get(ctx, delayq.Ref{ID: "before"})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get(before) = %v 10 s after running out of space, want it served read-only", err)
		}
		time.Sleep(20 * time.Millisecond) // polling the observable state the watcher changes
	}
	if h := s.Health(); !strings.Contains(h, "reads only") || strings.Contains(h, dir) {
		t.Errorf("Health() read-only after ENOSPC = %q, want reads only, naming no path", h)
	}
	if _, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"crash"}, Max: 1, Now: t0}); !errors.Is(err, delayq.ErrDiskFull) {
		t.Errorf("Reserve read-only after ENOSPC = %v, want ErrDiskFull", err)
	}

	full.Store(false)
	free.Store(1 << 40)
	for deadline := time.Now().Add(10 * time.Second); s.Health() != ""; {
		if time.Now().After(deadline) {
			t.Fatalf("Health() = %q 10 s after space returned, want the store back", s.Health())
		}
		time.Sleep(20 * time.Millisecond) // polling the observable state the watcher changes
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "before"}); err != nil {
		t.Errorf("Get(before) after the reopen = %v", err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "lost"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get(lost) after the reopen = %v, want ErrNotFound: its put was refused", err)
	}
	if err := s.Put(ctx, []*delayq.Job{crashJob("lost", false)}); err != nil {
		t.Errorf("Put after the reopen = %v", err)
	}
}
