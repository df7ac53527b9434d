package gcfloor

import (
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc reads the GOGC the runtime paces by.
func gogc(t *testing.T) int {
	t.Helper()
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(s[0].Value.Uint64())
}

// waitCycles runs collections until the tuner has seen n more cycles: its
// cleanup runs on a goroutine after each cycle. It waits on the tuner's
// own count, never on time alone; the deadline only turns a hang into a
// failure.
func waitCycles(t *testing.T, tu *Tuner, n int) {
	t.Helper()
	_, start := tu.Percent()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, c := tu.Percent(); c >= start+n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tuner saw no GC cycle")
		}
		runtime.GC()
		runtime.Gosched()
	}
}

func TestPercentFor(t *testing.T) {
	for _, c := range []struct {
		live, roots, floor uint64
		want               int
	}{
		{0, 0, 32 << 20, 800},       // empty: Go's minimum goal, 4 MiB×8, is the floor
		{1, 0, 32 << 20, 800},       // never more, or that minimum overshoots it
		{1 << 20, 0, 32 << 20, 800}, // (3,100 would make the minimum 124 MiB)
		{1, 0, 1 << 20, 100},
		{4 << 20, 0, 32 << 20, 700},       // 4 MiB live: goal 32 MiB
		{8 << 20, 0, 32 << 20, 300},       // 8 MiB live: goal 32 MiB
		{3 << 20, 1 << 20, 32 << 20, 725}, // roots count: 3 + 4×7.25 = 32 MiB
		{16 << 20, 0, 32 << 20, 100},      // 2× live reaches the floor: Go's own pacing
		{16 << 20, 1 << 20, 32 << 20, 100},
		{64 << 20, 0, 32 << 20, 100},
		{30 << 20, 0, 32 << 20, 100}, // never below Go's default
	} {
		if got := PercentFor(c.live, c.roots, c.floor); got != c.want {
			t.Errorf("PercentFor(%d, %d, %d) = %d, want %d", c.live, c.roots, c.floor, got, c.want)
		}
	}
}

// TestFloorFollowsLiveHeap: a small live heap gets a GOGC above 100, so
// its goal reaches the floor; a live heap past half the floor gets Go's
// 100 back; Stop restores what was set before.
func TestFloorFollowsLiveHeap(t *testing.T) {
	t.Setenv("GOGC", "") // LookupEnv sees it set: unset it for Start
	unsetenv(t, "GOGC")
	before := debug.SetGCPercent(150)
	defer debug.SetGCPercent(before)

	tu := Start(256 << 20)
	if tu == nil {
		t.Fatal("Start did nothing without GOGC set")
	}
	defer tu.Stop()
	waitCycles(t, tu, 1)
	if p, _ := tu.Percent(); p <= basePercent || gogc(t) != p {
		t.Fatalf("small heap: tuner set %d, runtime paces by %d; want one value above %d", p, gogc(t), basePercent)
	}

	big := make([][]byte, 0, 200)
	for range cap(big) {
		big = append(big, make([]byte, 1<<20)) // 200 MiB live: past half the floor
	}
	waitCycles(t, tu, 2)
	if p, _ := tu.Percent(); p != basePercent || gogc(t) != basePercent {
		t.Fatalf("large heap: tuner set %d, runtime paces by %d; want %d", p, gogc(t), basePercent)
	}
	runtime.KeepAlive(big)

	tu.Stop()
	if got := gogc(t); got != 150 {
		t.Fatalf("after Stop GOGC is %d, want the 150 from before Start", got)
	}
	_, seen := tu.Percent()
	runtime.GC()
	runtime.GC()
	if p, c := tu.Percent(); gogc(t) != 150 || c > seen+2 {
		t.Fatalf("a stopped tuner still acts: GOGC %d (tuner %d), cycles %d after %d", gogc(t), p, c, seen)
	}
}

// TestOperatorGOGCWins: with GOGC in the environment the floor stays off.
func TestOperatorGOGCWins(t *testing.T) {
	t.Setenv("GOGC", "100")
	before := debug.SetGCPercent(120)
	defer debug.SetGCPercent(before)
	if tu := Start(DefaultFloor); tu != nil {
		tu.Stop()
		t.Fatal("Start ran although GOGC was set")
	}
	if got := gogc(t); got != 120 {
		t.Fatalf("GOGC changed to %d", got)
	}
	var tu *Tuner
	tu.Stop() // a nil tuner stops quietly
}

// unsetenv removes key for the rest of the test; t.Setenv before it
// restores the old value afterwards.
func unsetenv(t *testing.T, key string) {
	t.Helper()
	if err := os.Unsetenv(key); err != nil {
		t.Fatal(err)
	}
}
