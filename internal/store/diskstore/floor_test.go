package diskstore

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/cockroachdb/pebble/v2"
	"golang.org/x/sys/unix"
)

// BenchmarkFloor measures what no store built on this machine's disk can
// beat, beside BenchmarkPut: a raw fdatasync of a 4 KiB overwrite in a
// preallocated file (the cheapest durable write there is), and Pebble on
// its own, with this store's options, committing one synced key per
// commit from 1 and 32 goroutines (its own group commit, nothing of
// delayq's on top). A client whose 32 connections each wait for a durable
// reply cannot get more than 32 replies per fsync; see docs/benchmarks.md.
func BenchmarkFloor(b *testing.B) {
	b.Run("fdatasync", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "f"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		const size = 64 << 20
		if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil {
			b.Skipf("fallocate: %v", err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 4096)
		b.ResetTimer()
		for i := range b.N {
			if _, err := f.WriteAt(buf, int64(i)*4096%size); err != nil {
				b.Fatal(err)
			}
			if err := unix.Fdatasync(int(f.Fd())); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/sync")
	})
	for _, g := range []int{1, 32} {
		b.Run(fmt.Sprintf("pebble-synced-commit/goroutines=%d", g), func(b *testing.B) {
			o := Options{}
			o.setDefaults()
			cache := pebble.NewCache(o.CacheSize)
			defer cache.Unref()
			db, err := pebble.Open(b.TempDir(), pebbleOptions(o, cache))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			val := make([]byte, 300) // about a job record with a 100-byte body
			b.ResetTimer()
			inParallel(b, g, func(i int64) error {
				return db.Set(fmt.Appendf(nil, "J%016d", i), val, pebble.Sync)
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
		})
	}
}
