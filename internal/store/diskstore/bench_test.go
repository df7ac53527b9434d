package diskstore

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

func benchJob(id string, body []byte) *delayq.Job {
	return &delayq.Job{ID: id, Topic: "bench", Body: body, Priority: delayq.DefaultPriority, TTR: time.Minute,
		State: delayq.StateReady, Due: t0, Created: t0}
}

// inParallel runs op for i = 1..b.N from g goroutines, stopping at the
// first error.
func inParallel(b *testing.B, g int, op func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range g {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := op(i); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// BenchmarkPut measures single-job durable puts from 1 and 32 goroutines;
// with 32 the writers share fsyncs (group commit).
func BenchmarkPut(b *testing.B) {
	for _, g := range []int{1, 32} {
		b.Run(fmt.Sprintf("goroutines=%d", g), func(b *testing.B) {
			s := openAt(b, b.TempDir(), Options{})
			defer s.Close()
			body := make([]byte, 64)
			b.ReportAllocs()
			b.ResetTimer()
			inParallel(b, g, func(i int64) error {
				return s.Put(b.Context(), []*delayq.Job{benchJob(fmt.Sprintf("j%d", i), body)})
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "puts/s")
		})
	}
}

// BenchmarkPutBatch100 measures a durable put of 100 jobs in one write.
func BenchmarkPutBatch100(b *testing.B) {
	s := openAt(b, b.TempDir(), Options{})
	defer s.Close()
	body := make([]byte, 64)
	b.ReportAllocs()
	for i := range b.N {
		jobs := make([]*delayq.Job, 100)
		for k := range jobs {
			jobs[k] = benchJob(fmt.Sprintf("j%d-%d", i, k), body)
		}
		if err := s.Put(b.Context(), jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(100*b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkPutReserveDelete measures a job's whole life (three durable
// writes) per body size, as beanstalkd's ctbench_put_delete_*.
func BenchmarkPutReserveDelete(b *testing.B) {
	for _, size := range []int{8, 1024, 8192} {
		b.Run(fmt.Sprintf("body=%d", size), func(b *testing.B) {
			s := openAt(b, b.TempDir(), Options{})
			defer s.Close()
			body := make([]byte, size)
			ctx := b.Context()
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for i := range b.N {
				if err := s.Put(ctx, []*delayq.Job{benchJob(fmt.Sprintf("j%d", i), body)}); err != nil {
					b.Fatal(err)
				}
				jobs, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"bench"}, Max: 1, Now: t0})
				if err != nil || len(jobs) != 1 {
					b.Fatalf("Reserve = %d jobs, %v", len(jobs), err)
				}
				ref := delayq.Ref{ID: jobs[0].ID, Reservation: jobs[0].Reservation}
				if _, err := s.Delete(ctx, store.DeleteParams{Ref: ref}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReserveDeleteParallel measures what a busy consumer fleet
// costs: 32 goroutines each reserve one job and delete it, over a store
// preloaded with b.N ready jobs of 100 bytes (the figure behind the
// beanstalkd-protocol reserve+delete benchmark, without the sockets).
//
// Sub-benchmarks: the default mode (fsync before every answer) and the
// fsync window (--fsync 50ms), each with the process's CPU per
// reserve+delete and the committer's wake-ups per transition.
func BenchmarkReserveDeleteParallel(b *testing.B) {
	for _, mode := range []struct {
		name  string
		every time.Duration
	}{{"always", 0}, {"50ms", 50 * time.Millisecond}} {
		b.Run(mode.name, func(b *testing.B) { benchReserveDelete(b, Options{SyncEvery: mode.every}) })
	}
}

func benchReserveDelete(b *testing.B, opts Options) {
	s := openAt(b, b.TempDir(), opts)
	defer s.Close()
	body := make([]byte, 100)
	ctx := b.Context()
	for i := 0; i < b.N; i += 1000 {
		jobs := make([]*delayq.Job, 0, 1000)
		for k := i; k < min(i+1000, b.N); k++ {
			jobs = append(jobs, benchJob(fmt.Sprintf("j%d", k), body))
		}
		if err := s.PutFresh(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetParallelism(16) // 32 goroutines on this 2-core machine
	s.mu.Lock()
	groups0, ops0, wakes0 := s.stats.groups, s.stats.ops, s.wakes
	s.mu.Unlock()
	cpu0 := cpuTime()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			jobs, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"bench"}, Max: 1, Now: t0})
			if err != nil || len(jobs) != 1 {
				b.Errorf("Reserve = %d jobs, %v", len(jobs), err)
				return
			}
			ref := delayq.Ref{ID: jobs[0].ID, Reservation: jobs[0].Reservation}
			if _, err := s.Delete(ctx, store.DeleteParams{Ref: ref}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
	s.mu.Lock()
	b.ReportMetric(float64(s.stats.ops-ops0)/float64(s.stats.groups-groups0), "ops/group")
	b.ReportMetric(float64(s.wakes-wakes0)/float64(s.stats.ops-ops0), "wakes/op")
	s.mu.Unlock()
}

// BenchmarkRetainedDisk measures what retained jobs cost on disk: 20,000
// jobs (100 random bytes of body, ids shaped as the engine's UUIDv7s with
// their random bits, so neither compresses away) are put, reserved and
// finished in batches of 500, the store is flushed and compacted, and the
// sstables' bytes per job are reported. Run it once:
//
//	go test -run '^$' -bench RetainedDisk -benchtime 1x ./internal/store/diskstore/
func BenchmarkRetainedDisk(b *testing.B) {
	const n, batch = 20_000, 500
	for _, c := range []struct {
		name string
		r    store.Retention
	}{
		{"retain=off", store.Retention{}},
		{"retain=1h,bodies=false", store.Retention{For: time.Hour}},
		{"retain=1h,bodies=true", store.Retention{For: time.Hour, Bodies: true}},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				c.r.Now = func() time.Time { return t0 }
				dir := b.TempDir()
				s := openAt(b, dir, Options{MinFree: -1, Retention: c.r})
				rng := rand.New(rand.NewPCG(1, 2))
				ctx := b.Context()
				for i := 0; i < n; i += batch {
					jobs := make([]*delayq.Job, batch)
					for k := range jobs {
						body := make([]byte, 100)
						for x := range body {
							body[x] = byte(rng.Uint32())
						}
						id := fmt.Sprintf("0199b5e4-%04x-7%03x-8%03x-%012x", i/batch, rng.Uint32()&0xfff, rng.Uint32()&0xfff, rng.Uint64()&(1<<48-1))
						jobs[k] = benchJob(id, body)
					}
					if err := s.Put(ctx, jobs); err != nil {
						b.Fatal(err)
					}
					got, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"bench"}, Max: batch, Now: t0, By: "worker-1"})
					if err != nil || len(got) != batch {
						b.Fatal(len(got), err)
					}
					ps := make([]store.DeleteParams, batch)
					for k, j := range got {
						ps[k] = store.DeleteParams{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Now: t0}
					}
					if _, _, err := s.DeleteBatch(ctx, ps); err != nil {
						b.Fatal(err)
					}
				}
				s.mu.Lock()
				s.flushLocked()
				s.mu.Unlock()
				if err := s.db.Flush(); err != nil {
					b.Fatal(err)
				}
				if err := s.db.Compact(ctx, []byte{0}, []byte{0xff}, false); err != nil {
					b.Fatal(err)
				}
				var bytes int64
				for _, l := range s.db.Metrics().Levels {
					bytes += l.TablesSize
				}
				b.ReportMetric(float64(bytes)/n, "disk_B/job")
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// slowWALSyncs returns the real filesystem with delay added before every
// WAL sync, as a disk whose fdatasync takes that much longer (the
// in-process form of bench.sh's FSYNC_DELAY_US), and the count of those
// syncs.
func slowWALSyncs(delay time.Duration) (vfs.FS, *atomic.Int64) {
	var n atomic.Int64
	fs := errorfs.Wrap(vfs.Default, errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, ".log") && (op.Kind == errorfs.OpFileSync || op.Kind == errorfs.OpFileSyncData) {
			n.Add(1)
			time.Sleep(delay)
		}
		return nil
	}))
	return fs, &n
}

// BenchmarkPutSlowSync measures 32 goroutines of single durable puts on
// a disk whose WAL sync takes delay more (0: this disk as it is): Little's
// law bounds them at 32 puts per delay (32,000/s for 1 ms), reported as
// of_bound. The 10 ms
// case shows the commit pipeline's shape even on a loaded machine, where
// waiting for a CPU adds milliseconds to every hand-off.
func BenchmarkPutSlowSync(b *testing.B) {
	for _, delay := range []time.Duration{0, time.Millisecond, 10 * time.Millisecond} {
		b.Run("delay="+delay.String(), func(b *testing.B) {
			const g = 32
			fs, syncs := slowWALSyncs(delay)
			s := openAt(b, b.TempDir(), Options{fs: fs})
			defer s.Close()
			body := make([]byte, 100)
			s.mu.Lock()
			groups0, ops0 := s.stats.groups, s.stats.ops
			s.mu.Unlock()
			syncs0 := syncs.Load()
			cpu0 := cpuTime()
			b.ResetTimer()
			inParallel(b, g, func(i int64) error {
				return s.Put(b.Context(), []*delayq.Job{benchJob(fmt.Sprintf("j%d", i), body)})
			})
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/put")
			rate := float64(b.N) / b.Elapsed().Seconds()
			b.ReportMetric(rate, "puts/s")
			if delay > 0 {
				b.ReportMetric(rate/(g/delay.Seconds()), "of_bound")
			}
			b.ReportMetric(float64(b.N)/float64(syncs.Load()-syncs0), "puts/sync")
			s.mu.Lock()
			b.ReportMetric(float64(s.stats.ops-ops0)/float64(s.stats.groups-groups0), "ops/group")
			s.mu.Unlock()
		})
	}
}

// cpuTime is the user and system CPU time of this process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
