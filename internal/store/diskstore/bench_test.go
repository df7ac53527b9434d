package diskstore

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
func BenchmarkReserveDeleteParallel(b *testing.B) {
	s := openAt(b, b.TempDir(), Options{})
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
	s.mu.Lock()
	b.ReportMetric(float64(s.stats.ops)/float64(s.stats.groups), "ops/group")
	s.mu.Unlock()
}
