package diskstore

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// The power-loss test (issue 28's "one durable-write path").
//
// The store runs on Pebble's crashable in-memory filesystem, which keeps
// apart what was written and what was synced. A seeded random sequence
// of every kind of write (jobs through every transition, documents of
// every kind written and deleted, chart series, the timer and the
// retention's expiry) is cut at random points: CrashClone copies the
// filesystem as a power loss at that moment would leave it (only what was
// synced), a store is opened on the copy, and it must hold every write
// acknowledged before the cut, exactly as the store that kept running
// shows it. With the fsync window (Options.SyncEvery) a write may be lost
// within its window, so there the cut is taken once a sync round has run
// after the last acknowledgement. The format upgrades are cut right after
// Open returns.
//
// In CI it runs a few short sequences per mode (about a second in all).
// As a soak, DISKSTORE_POWERLOSS_ROUNDS sets how many sequences each mode
// runs and DISKSTORE_POWERLOSS_STEPS their length, e.g.
//
//	DISKSTORE_POWERLOSS_ROUNDS=500 go test -run PowerLoss ./internal/store/diskstore/
//
// Each sequence is a subtest named by its seed; DISKSTORE_POWERLOSS_SEED
// replays one.

// powerLossEnv reads an integer knob of the power-loss test.
func powerLossEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// powerLossSeeds is the seeds of the sequences to run.
func powerLossSeeds(t *testing.T) []uint64 {
	if v := os.Getenv("DISKSTORE_POWERLOSS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DISKSTORE_POWERLOSS_SEED=%q: %v", v, err)
		}
		return []uint64{n}
	}
	rounds := powerLossEnv(t, "DISKSTORE_POWERLOSS_ROUNDS", 3)
	seeds := make([]uint64, rounds)
	base := uint64(time.Now().UnixNano())
	for i := range seeds {
		seeds[i] = base + uint64(i)
	}
	return seeds
}

func TestPowerLoss(t *testing.T) {
	steps := powerLossEnv(t, "DISKSTORE_POWERLOSS_STEPS", 120)
	for _, mode := range []struct {
		name   string
		window time.Duration
	}{{"FsyncAlways", 0}, {"FsyncWindow", 2 * time.Millisecond}} {
		t.Run(mode.name, func(t *testing.T) {
			for _, seed := range powerLossSeeds(t) {
				t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
					t.Logf("replay with DISKSTORE_POWERLOSS_SEED=%d", seed)
					powerLossRun(t, seed, steps, mode.window)
				})
			}
		})
	}
}

// plClock is the store's clock in the power-loss test: it moves only when
// the sequence says so.
type plClock struct{ ms atomic.Int64 }

func (c *plClock) now() time.Time { return time.UnixMilli(c.ms.Load()).UTC() }

// plOptions are the store options of a power-loss run on fs.
func plOptions(fs vfs.FS, window time.Duration, clock *plClock) Options {
	return Options{fs: fs, MinFree: -1, SyncEvery: window, MemTableSize: 256 << 10, CacheSize: 1 << 20,
		Retention: store.Retention{For: 30 * time.Minute, Now: clock.now}}
}

const plDir = "/data"

var plDocKinds = []string{"schedule", "policy", "alarm"}

func powerLossRun(t *testing.T, seed uint64, steps int, window time.Duration) {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	mem := vfs.NewCrashableMem()
	clock := &plClock{}
	clock.ms.Store(t0.UnixMilli())
	opts := plOptions(mem, window, clock)
	s, err := Open(plDir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	topics := []string{"a", "b"}
	var ids []string
	docRev := map[string]uint64{} // kind/name -> current rev (0: none)
	cuts := 0
	for step := range steps {
		now := clock.now()
		if err := plStep(t, s, rng, step, now, topics, &ids, docRev); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if rng.IntN(100) < 4 {
			clock.ms.Add(int64(rng.IntN(20)) * int64(time.Minute/time.Millisecond))
		}
		if rng.IntN(steps/4+1) == 0 || step == steps-1 {
			cuts++
			powerCut(t, s, mem, window, clock, ids, topics, fmt.Sprintf("cut %d after step %d", cuts, step))
		}
	}
}

// plStep makes one acknowledged write of a random kind.
func plStep(t *testing.T, s *Store, rng *rand.Rand, step int, now time.Time, topics []string, ids *[]string, docRev map[string]uint64) error {
	ctx := t.Context()
	topic := topics[rng.IntN(len(topics))]
	ref := func() delayq.Ref {
		if len(*ids) == 0 {
			return delayq.Ref{ID: "none"}
		}
		return delayq.Ref{ID: (*ids)[rng.IntN(len(*ids))]}
	}
	// reserved returns the reservation ref of a job reserved now, if any.
	reserved := func() (delayq.Ref, bool) {
		jobs, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{topic}, Max: 1, Now: now, By: "pl"})
		if err != nil || len(jobs) == 0 {
			return delayq.Ref{}, false
		}
		return delayq.Ref{ID: jobs[0].ID, Reservation: jobs[0].Reservation}, true
	}
	ignore := func(err error) error {
		if err == nil || errors.Is(err, delayq.ErrNotFound) || errors.Is(err, delayq.ErrNotReserved) ||
			errors.Is(err, delayq.ErrState) {
			return nil
		}
		return err
	}
	switch k := rng.IntN(16); k {
	case 0, 1, 2: // put: ready or delayed, one or a batch
		n := 1 + rng.IntN(3)
		jobs := make([]*delayq.Job, n)
		for i := range jobs {
			id := fmt.Sprintf("j%d-%d", step, i)
			j := &delayq.Job{ID: id, Topic: topic, Body: []byte(strings.Repeat(id, 1+rng.IntN(40))), State: delayq.StateReady,
				TTR: time.Hour, Due: now, Created: now, Priority: uint32(rng.IntN(3))}
			if rng.IntN(2) == 0 {
				j.State, j.Due = delayq.StateDelayed, now.Add(time.Duration(1+rng.IntN(30))*time.Minute)
			}
			jobs[i] = j
		}
		if err := s.Put(ctx, jobs); err != nil {
			return err
		}
		for _, j := range jobs {
			*ids = append(*ids, j.ID)
		}
	case 3: // reserve and keep it
		reserved()
	case 4: // reserve, release (ready or delayed)
		if r, ok := reserved(); ok {
			p := store.ReleaseParams{Ref: r, Due: now, Now: now, Reason: "again"}
			if rng.IntN(2) == 0 {
				p.Due, p.Delay = now.Add(5*time.Minute), 5*time.Minute
			}
			_, err := s.Release(ctx, p)
			return ignore(err)
		}
	case 5: // reserve, bury
		if r, ok := reserved(); ok {
			_, err := s.Bury(ctx, store.BuryParams{Ref: r, Reason: "bad", Now: now})
			return ignore(err)
		}
	case 6: // reserve, finish (retained as finished)
		if r, ok := reserved(); ok {
			_, err := s.Delete(ctx, store.DeleteParams{Ref: r, Now: now})
			return ignore(err)
		}
	case 7: // reserve, touch
		if r, ok := reserved(); ok {
			_, err := s.Touch(ctx, store.TouchParams{Ref: r, Now: now})
			return ignore(err)
		}
	case 8: // kick the buried
		_, err := s.Kick(ctx, store.KickParams{Topic: topic, Max: 1 + rng.IntN(3), Now: now})
		return ignore(err)
	case 9: // forced delete (retained as deleted)
		_, err := s.Delete(ctx, store.DeleteParams{Ref: ref(), Force: true, Now: now})
		return ignore(err)
	case 10: // update a job's due time
		due := now.Add(time.Duration(rng.IntN(10)) * time.Minute)
		_, err := s.Update(ctx, store.UpdateParams{Ref: ref(), Due: &due, Now: now})
		return ignore(err)
	case 11: // the timer: delayed jobs become ready, expired retained jobs go
		_, err := s.Tick(ctx, store.TickParams{Now: now})
		return err
	case 12: // pause or resume a topic
		until := time.Time{}
		if rng.IntN(2) == 0 {
			until = now.Add(time.Hour)
		}
		return s.Pause(ctx, store.PauseParams{Topic: topic, Until: until})
	case 13, 14: // a document of some kind: saved, or deleted
		kind := plDocKinds[rng.IntN(len(plDocKinds))]
		name := fmt.Sprintf("d%d", rng.IntN(4))
		key := kind + "/" + name
		cur := docRev[key]
		if cur > 0 && rng.IntN(3) == 0 {
			if err := s.DeleteDoc(ctx, kind, name); err != nil {
				return err
			}
			delete(docRev, key)
			return nil
		}
		d := &store.Doc{Name: name, Rev: cur + 1, Data: fmt.Appendf(nil, `{"step":%d}`, step)}
		if err := s.SaveDoc(ctx, kind, d, cur); err != nil {
			return err
		}
		docRev[key] = cur + 1
	case 15: // a chart sample
		smp := store.SeriesSample{Topic: topic, Ready: rng.IntN(9), Fires: rng.IntN(5), Finishes: 1}
		return s.AddSeries(ctx, now, []store.SeriesSample{smp})
	}
	return nil
}

// powerCut cuts the power under the running store s: the acknowledged
// state now is what a store opened on a crash clone of mem must hold.
func powerCut(t *testing.T, s *Store, mem *vfs.MemFS, window time.Duration, clock *plClock, ids, topics []string, where string) {
	t.Helper()
	want := plState(t, s, clock.now(), ids, topics)
	if window > 0 {
		// Acknowledged within the window: durable once a sync round that
		// began after the last acknowledgement has ended.
		waitSyncRounds(t, s, 2)
	}
	clone := mem.CrashClone(vfs.CrashCloneCfg{})
	r, err := Open(plDir, plOptions(clone, window, clock))
	if err != nil {
		t.Fatalf("%s: Open after the power cut = %v", where, err)
	}
	defer func() { _ = r.Close() }()
	got := plState(t, r, clock.now(), ids, topics)
	if d := diffLines(want, got); d != "" {
		t.Fatalf("%s: the store reopened after a power cut differs from what was acknowledged (- acknowledged, + after the cut):\n%s", where, d)
	}
}

// waitSyncRounds waits until the fsync window's loop has ended n more
// rounds.
func waitSyncRounds(t *testing.T, s *Store, n uint64) {
	t.Helper()
	start := s.wal.rounds.Load()
	deadline := time.Now().Add(10 * time.Second)
	for s.wal.rounds.Load() < start+n {
		if time.Now().After(deadline) {
			t.Fatalf("the fsync window's loop ended %d rounds in 10 s, want %d", s.wal.rounds.Load()-start, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// plState describes, one line each, what s holds: every job ever put
// (its state and what its transitions changed), every topic's counters
// and pause, every document and the chart series.
func plState(t *testing.T, s *Store, now time.Time, ids, topics []string) []string {
	t.Helper()
	ctx := t.Context()
	var out []string
	for _, id := range ids {
		j, err := s.Get(ctx, delayq.Ref{ID: id})
		switch {
		case errors.Is(err, delayq.ErrNotFound):
			out = append(out, "job "+id+" absent")
			continue
		case err != nil:
			t.Fatalf("Get(%s) = %v", id, err)
		}
		out = append(out, fmt.Sprintf("job %s seq=%d state=%s due=%d pri=%d res=%q attempts=%d history=%d ended=%d body=%d",
			id, j.Seq, j.State, j.Due.UnixMilli(), j.Priority, j.Reservation, j.Attempts, len(j.History), j.Ended.UnixMilli(), len(j.Body)))
	}
	sts, err := s.Topics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range sts {
		out = append(out, fmt.Sprintf("topic %s ready=%d delayed=%d reserved=%d buried=%d paused=%d",
			st.Name, st.Ready, st.Delayed, st.Reserved, st.Buried, st.PausedUntil.UnixMilli()))
	}
	for _, kind := range plDocKinds {
		docs, err := s.ListDocs(ctx, kind)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range docs {
			out = append(out, fmt.Sprintf("doc %s/%s rev=%d data=%s", kind, d.Name, d.Rev, d.Data))
		}
	}
	for _, topic := range topics {
		for _, r := range store.SeriesResolutions {
			bs, err := s.ReadSeries(ctx, store.SeriesReadParams{Topic: topic, Step: r.Step, From: now.Add(-r.Keep / 2), To: now, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			for _, b := range bs {
				out = append(out, fmt.Sprintf("series %s/%s %d ready=%d fires=%d finishes=%d", topic, r.Step, b.At.Unix(), b.Ready, b.Fires, b.Finishes))
			}
		}
	}
	return out
}

// diffLines lists the lines of want missing from got (-) and of got not
// in want (+); "" when they hold the same lines.
func diffLines(want, got []string) string {
	var b strings.Builder
	for _, l := range want {
		if !slices.Contains(got, l) {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	for _, l := range got {
		if !slices.Contains(want, l) {
			fmt.Fprintf(&b, "+ %s\n", l)
		}
	}
	return b.String()
}

// TestPowerLossFormatUpgrade: a store of an older format is upgraded
// (version 3: the version alone; version 1: every record sealed) when
// Open returns, and a power cut right then (with the fsync window: once
// a sync round has run) keeps the upgrade: the version key on the synced
// disk is the current one.
func TestPowerLossFormatUpgrade(t *testing.T) {
	for _, from := range []string{"v1store", "v3store"} {
		for _, window := range []time.Duration{0, 2 * time.Millisecond} {
			t.Run(fmt.Sprintf("%s/window=%s", from, window), func(t *testing.T) {
				mem := vfs.NewCrashableMem()
				memCopy(t, mem, "testdata/"+from, plDir)
				s, err := Open(plDir, Options{fs: mem, MinFree: -1, SyncEvery: window})
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = s.Close() }()
				if window > 0 {
					waitSyncRounds(t, s, 2)
				}
				clone := mem.CrashClone(vfs.CrashCloneCfg{})
				db := rawDBOn(t, clone, plDir)
				v, closer, err := db.Get(metaVersionKey)
				if err != nil {
					t.Fatalf("version after the power cut: %v", err)
				}
				got := slices.Clone(v)
				_ = closer.Close()
				_ = db.Close()
				if want := []byte{0, 0, 0, byte(formatVersion)}; !slices.Equal(got, want) {
					t.Fatalf("version on the synced disk after the upgrade = %x, want %x: the upgrade was acknowledged (Open returned) but not durable", got, want)
				}
			})
		}
	}
}

// rawDBOn opens the Pebble database in dir of fs directly.
func rawDBOn(t *testing.T, fs vfs.FS, dir string) *pebble.DB {
	t.Helper()
	db, err := pebble.Open(dir, &pebble.Options{FS: fs, Logger: pebbleLogger{l: slog.New(slog.DiscardHandler)}})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// memCopy copies the files of the real directory from into dir of mem,
// synced.
func memCopy(t *testing.T, mem *vfs.MemFS, from, dir string) {
	t.Helper()
	if err := mem.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := fs.WalkDir(os.DirFS(from), ".", func(name string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		b, err := os.ReadFile(from + "/" + name)
		if err != nil {
			return err
		}
		f, err := mem.Create(path.Join(dir, name), vfs.WriteCategoryUnspecified)
		if err != nil {
			return err
		}
		if _, err := f.Write(b); err != nil {
			return err
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return f.Close()
	})
	if err != nil {
		t.Fatal(err)
	}
	syncDirFS(mem, dir)
}
