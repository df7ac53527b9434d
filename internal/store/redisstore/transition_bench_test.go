package redisstore

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// BenchmarkTransitionCost measures what each transition costs Redis, one
// call at a time (no concurrency, so the figures move little with the
// machine's load): n puts of fresh ids (as the engine's PutFresh), n
// reserves of one job, n finishes by seq with the reservation (as a
// beanstalkd client's delete), with the default retention and with none;
// then n puts more from 32 goroutines (put-c32: what grouping saves).
// Per transition it reports the Redis main thread's CPU (INFO cpu) and
// the scripts' time (EVALSHA usec in INFO commandstats), and logs the
// commands each transition ran. Run it against a Redis nothing else
// uses (issue 31; docs/benchmarks.md):
//
//	go test -run '^$' -bench TransitionCost -benchtime 1x ./internal/store/redisstore/
//
// CPU time moves with the machine's load (the figures above move little,
// not nothing). Instructions do not: with DELAYQ_BENCH_CALLGRIND=DIR, for
// a Redis run under `valgrind --tool=callgrind
// --callgrind-out-file=DIR/cg.out.%p`, each phase also reports the
// instructions Redis executed per call (callgrind_control zeroes and
// dumps the counts around the phase; what Redis runs per second with the
// store idle, measured first, is taken off).
func BenchmarkTransitionCost(b *testing.B) {
	for _, keep := range []time.Duration{time.Hour, 0} {
		b.Run("retain="+keep.String(), func(b *testing.B) {
			for range b.N {
				transitionCost(b, keep)
			}
		})
	}
}

func transitionCost(b *testing.B, keep time.Duration) {
	n := 5000
	if v, err := strconv.Atoi(os.Getenv("DELAYQ_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	s := openStore(b, redisAddrs(b, "DELAYQ_TEST_REDIS"), Options{Retention: store.Retention{For: keep}})
	defer s.Close()
	ctx := b.Context()
	defer s.c.Do(ctx, s.c.B().Eval().Script(
		"for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end").Numkeys(0).Arg(s.opt.Prefix+":*").Build())
	info := func(section string) string {
		v, err := s.c.Do(ctx, s.c.B().Info().Section(section).Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		return v
	}
	cpu := func() float64 {
		v := info("cpu")
		u, _ := strconv.ParseFloat(infoField(v, "used_cpu_user_main_thread"), 64)
		sy, _ := strconv.ParseFloat(infoField(v, "used_cpu_sys_main_thread"), 64)
		return (u + sy) * 1e6
	}
	cg := os.Getenv("DELAYQ_BENCH_CALLGRIND")
	// idle is what Redis runs per second for this store's own loops
	// (leases, membership), taken off each phase's count.
	var idle float64
	if cg != "" {
		callgrind(b, "-z")
		began := time.Now()
		time.Sleep(2 * time.Second)
		idle = callgrindTotal(b, cg) / time.Since(began).Seconds()
		b.Logf("idle: %.0f instructions per second", idle)
	}
	// phase runs f for 0..n-1 in conc goroutines and reports Redis's CPU
	// and script time per call, and logs the commands per call.
	phase := func(name string, conc int, f func(i int)) {
		if err := s.c.Do(ctx, s.c.B().ConfigResetstat().Build()).Error(); err != nil {
			b.Fatal(err)
		}
		if cg != "" {
			callgrind(b, "-z")
		}
		began := time.Now()
		c0 := cpu()
		var next atomic.Int64
		var wg sync.WaitGroup
		for range conc {
			wg.Go(func() {
				for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
					f(i)
				}
			})
		}
		wg.Wait()
		used := cpu() - c0
		if cg != "" {
			ir := callgrindTotal(b, cg) - idle*time.Since(began).Seconds()
			b.ReportMetric(ir/float64(n), "Ir/"+name)
			b.Logf("%s: %.0f instructions per call", name, ir/float64(n))
		}
		var cmds []string
		var script float64
		for _, line := range strings.Split(info("commandstats"), "\n") {
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
			if !ok {
				continue
			}
			cmd, stats, _ := strings.Cut(rest, ":")
			calls, _ := strconv.ParseFloat(infoStat(stats, "calls"), 64)
			usec, _ := strconv.ParseFloat(infoStat(stats, "usec"), 64)
			if cmd == "evalsha" || cmd == "eval" {
				script += usec
			}
			if calls/float64(n) >= 0.01 && cmd != "info" && cmd != "config|resetstat" {
				cmds = append(cmds, fmt.Sprintf("%s=%.2f×%.2fus", cmd, calls/float64(n), usec/calls))
			}
		}
		sort.Strings(cmds)
		b.ReportMetric(used/float64(n), "us-cpu/"+name)
		b.ReportMetric(script/float64(n), "us-script/"+name)
		b.Logf("%s: %.1f us cpu, %.1f us in scripts; per call %s", name, used/float64(n), script/float64(n), strings.Join(cmds, " "))
	}
	jobs := make([]*delayq.Job, n)
	now := delayq.TruncMilli(time.Now())
	phase("put", 1, func(i int) {
		j := &delayq.Job{ID: fmt.Sprintf("0193b6a2-7c1e-7%03x-8a4b-%012d", i%4096, i), Topic: "emails",
			Body: []byte(strings.Repeat("x", 100)), TTR: time.Minute, Priority: 1024, State: delayq.StateReady, Due: now, Created: now}
		if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			b.Fatal(err)
		}
	})
	phase("reserve", 1, func(i int) {
		js, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"emails"}, Max: 1, Now: time.Now(), By: "worker-7"})
		if err != nil || len(js) != 1 {
			b.Fatalf("Reserve = %d jobs, %v", len(js), err)
		}
		jobs[i] = js[0]
	})
	phase("finish", 1, func(i int) {
		j := jobs[i]
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{Seq: j.Seq, Reservation: j.Reservation}, Now: time.Now()}); err != nil {
			b.Fatal(err)
		}
	})
	// Puts from 32 goroutines, as 32 producers send them: on one node
	// those that arrive while one is in flight go as one script call
	// (putgroup.go). Last, so the phases above see the same topic as
	// before it was added.
	phase("put-c32", 32, func(i int) {
		j := &delayq.Job{ID: fmt.Sprintf("0193b6a2-7c1e-7%03x-9a4b-%012d", i%4096, i), Topic: "emails",
			Body: []byte(strings.Repeat("x", 100)), TTR: time.Minute, Priority: 1024, State: delayq.StateReady, Due: now, Created: now}
		if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			b.Error(err)
		}
	})
	if !s.oneNode {
		return
	}
	// The same again, reserved and finished in groups of g (finish.go,
	// reservegroup.go) as concurrent consumers' calls are: the cost per
	// reserve and per finish.
	for _, g := range []int{2, 8} {
		for i := range n {
			j := &delayq.Job{ID: fmt.Sprintf("g%d-%d", g, i), Topic: "emails", Body: []byte(strings.Repeat("x", 100)),
				TTR: time.Minute, Priority: 1024, State: delayq.StateReady, Due: now, Created: now}
			if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
				b.Fatal(err)
			}
		}
		phase(fmt.Sprintf("reserve-group%d", g), 1, func(i int) {
			if i%g != 0 {
				return
			}
			var calls []*reserveCall
			for range min(g, n-i) {
				t := time.Now()
				calls = append(calls, &reserveCall{topic: "emails", now: msString(t), begin: ceilMSString(t), max: 1, by: "worker-7"})
			}
			s.writeReserves(ctx, calls)
			for k, c := range calls {
				if c.err != nil || len(c.jobs) != 1 {
					b.Fatalf("grouped Reserve = %d jobs, %v", len(c.jobs), c.err)
				}
				jobs[i+k] = c.jobs[0]
			}
		})
		phase(fmt.Sprintf("finish-group%d", g), 1, func(i int) {
			if i%g != 0 {
				return
			}
			var calls []*finishCall
			for _, j := range jobs[i:min(i+g, n)] {
				calls = append(calls, &finishCall{t: target{topic: j.Topic, mode: "s", ref: strconv.FormatUint(j.Seq, 10)},
					res: j.Reservation, now: msString(time.Now()), ref: delayq.Ref{Seq: j.Seq}})
			}
			s.writeFinishes(ctx, calls)
			for _, c := range calls {
				if c.err != nil {
					b.Fatal(c.err)
				}
			}
		})
	}
}

// callgrind runs callgrind_control with arg (-z zeroes, -d dumps).
func callgrind(b *testing.B, arg string) {
	if out, err := exec.Command("callgrind_control", arg).CombinedOutput(); err != nil {
		b.Fatalf("callgrind_control %s: %v: %s", arg, err, out)
	}
}

// callgrindTotal dumps the counts and returns the instructions of the
// newest dump in dir.
func callgrindTotal(b *testing.B, dir string) float64 {
	start := time.Now()
	callgrind(b, "-d")
	paths, _ := filepath.Glob(filepath.Join(dir, "cg.out.*.*"))
	var newest string
	var at time.Time
	for _, p := range paths {
		if fi, err := os.Stat(p); err == nil && fi.ModTime().After(at) {
			newest, at = p, fi.ModTime()
		}
	}
	if newest == "" || at.Before(start.Add(-time.Second)) {
		b.Fatalf("no callgrind dump in %s", dir)
	}
	data, err := os.ReadFile(newest)
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "totals: "); ok {
			ir, _ := strconv.ParseFloat(strings.Fields(v)[0], 64)
			return ir
		}
	}
	b.Fatalf("no totals in %s", newest)
	return 0
}

// infoStat is the value of key in a commandstats line's "k=v,k=v".
func infoStat(stats, key string) string {
	for _, kv := range strings.Split(stats, ",") {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}
