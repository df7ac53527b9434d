package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
)

// Line is the one-line, key=value summary of a result, for scripts.
func (r *Result) Line() string {
	o := r.Options
	return fmt.Sprintf("bench proto=%s mode=%s n=%d c=%d body=%d batch=%d take=%d topics=%d jobs_per_s=%.0f p50_ms=%.3f p99_ms=%.3f p999_ms=%.3f max_ms=%.3f early=%d drain_ms=%.1f rss_mib=%.1f",
		r.Protocol, o.Mode, r.Jobs, o.C, o.BodySize, o.Batch, o.Take, o.Topics, r.PerSec, ms(r.P50), ms(r.P99), ms(r.P999), ms(r.Max), r.Early, ms(r.Drain), float64(r.RSS)/(1<<20))
}

// Table writes the result for a person.
func (r *Result) Table(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	o := r.Options
	fmt.Fprintf(tw, "target\t%s (%s)\n", o.Target, r.Protocol)
	fmt.Fprintf(tw, "mode\t%s: %d jobs, %d connections, %d-byte bodies, batch %d, take %d\n", o.Mode, r.Jobs, o.C, o.BodySize, o.Batch, o.Take)
	if o.Topics > 1 {
		fmt.Fprintf(tw, "topics\t%d: %s-0 … %s-%d, round-robin\n", o.Topics, o.Topic, o.Topic, o.Topics-1)
	} else {
		fmt.Fprintf(tw, "topic\t%s\n", o.Topic)
	}
	fmt.Fprintf(tw, "elapsed\t%s\n", r.Elapsed.Round(time.Millisecond))
	fmt.Fprintf(tw, "throughput\t%.0f jobs/s\n", r.PerSec)
	what := "call latency"
	if o.Mode == ModeBurst || o.Mode == ModeSpread {
		what = "lateness"
		fmt.Fprintf(tw, "early jobs\t%d\n", r.Early)
		fmt.Fprintf(tw, "drain\t%s after the last due time\n", r.Drain.Round(time.Millisecond))
	}
	fmt.Fprintf(tw, "%s\tp50 %s  p99 %s  p99.9 %s  max %s\n", what, r.P50, r.P99, r.P999, r.Max)
	if r.RSS > 0 {
		fmt.Fprintf(tw, "server RSS\t%.1f MiB (max sampled)\n", float64(r.RSS)/(1<<20))
	}
	tw.Flush()
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startRSS samples pid's resident set every 100 ms until ctx ends and
// returns a function that gives the largest sample.
func startRSS(ctx context.Context, pid int) func() int64 {
	var peak atomic.Int64
	if pid <= 0 {
		return peak.Load
	}
	sample := func() {
		if v := readRSS(pid); v > peak.Load() {
			peak.Store(v)
		}
	}
	sample()
	go func() {
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample()
			}
		}
	}()
	return func() int64 { sample(); return peak.Load() }
}

// readRSS reads VmRSS from /proc (Linux); 0 when unavailable.
func readRSS(pid int) int64 { return ProcStatusBytes(pid, "VmRSS") }

// ProcStatusBytes reads a memory field of /proc/PID/status (VmRSS, VmHWM,
// ...) in bytes; 0 when unavailable (not Linux, no such process or field).
func ProcStatusBytes(pid int, field string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
