package redisstore

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// BenchmarkRetainedRedis measures what a retained job costs Redis (issue
// 20; docs/redis.md and docs/benchmarks.md quote it): 10,000 jobs with
// 36-character ids and 100-byte bodies are put, reserved by one consumer
// and finished, and Redis's used_memory is read before the puts, after
// them (live) and after the finishes (retained), for retention off, on
// without bodies, and on with bodies. Run it alone, against a Redis that
// nothing else writes to meanwhile:
//
//	go test -run '^$' -bench RetainedRedis -benchtime 1x ./internal/store/redisstore/
func BenchmarkRetainedRedis(b *testing.B) {
	for _, c := range []struct {
		name   string
		keep   time.Duration
		bodies bool
	}{{"off", 0, false}, {"nobodies", time.Hour, false}, {"bodies", time.Hour, true}} {
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				retainedCost(b, c.keep, c.bodies)
			}
		})
	}
}

func retainedCost(b *testing.B, keep time.Duration, bodies bool) {
	const n = 10000
	s := openStore(b, redisAddrs(b, "DELAYQ_TEST_REDIS"), Options{Retention: store.Retention{For: keep, Bodies: bodies}})
	defer s.Close()
	ctx := b.Context()
	used := func() int64 {
		info, err := s.c.Do(ctx, s.c.B().Info().Section("memory").Build()).ToString()
		if err != nil {
			b.Fatal(err)
		}
		v, _ := strconv.ParseInt(infoField(info, "used_memory"), 10, 64)
		return v
	}
	defer s.c.Do(ctx, s.c.B().Eval().Script(
		"for _, k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('UNLINK', k) end").Numkeys(0).Arg(s.opt.Prefix+":*").Build())
	before := used()
	now := delayq.TruncMilli(time.Now())
	for i := 0; i < n; i += 500 {
		var jobs []*delayq.Job
		for k := i; k < i+500; k++ {
			jobs = append(jobs, &delayq.Job{ID: fmt.Sprintf("0193b6a2-7c1e-7%03x-8a4b-%012d", k%4096, k), Topic: "emails",
				Body: []byte(strings.Repeat("x", 100)), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now})
		}
		if err := s.Put(ctx, jobs); err != nil {
			b.Fatal(err)
		}
	}
	live := used()
	start := time.Now()
	for done := 0; done < n; {
		js, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"emails"}, Max: 1000, Now: time.Now(), By: "worker-7"})
		if err != nil || len(js) == 0 {
			b.Fatalf("Reserve = %d jobs, %v", len(js), err)
		}
		for _, j := range js {
			if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Now: time.Now()}); err != nil {
				b.Fatal(err)
			}
		}
		done += len(js)
	}
	consume := time.Since(start)
	b.ReportMetric(float64(live-before)/n, "B/live-job")
	b.ReportMetric(float64(used()-before)/n, "B/retained-job")
	b.ReportMetric(float64(consume.Microseconds())/n, "µs/reserve+finish")
}
