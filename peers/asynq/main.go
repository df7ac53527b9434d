// Command asynq-peer is the asynq side of delayq's Redis benchmark
// (scripts/bench-redis.sh): it enqueues or works N tasks of a given body
// size with C producers or workers against one Redis and prints the rate.
// It lives in a Go module of its own so that delayq never depends on asynq.
//
//	asynq-peer -redis 127.0.0.1:6379 -mode enqueue -n 30000 -c 32 -body 100
//	asynq-peer -redis 127.0.0.1:6379 -mode work -n 30000 -c 32
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
)

func main() {
	addr := flag.String("redis", "", "Redis host:port (required)")
	mode := flag.String("mode", "", "enqueue or work")
	n := flag.Int("n", 30000, "tasks to enqueue or to work")
	c := flag.Int("c", 32, "producers (enqueue) or workers (work)")
	body := flag.Int("body", 100, "payload bytes per task")
	retention := flag.Duration("retention", 0, "keep completed tasks this long (asynq.Retention); 0 deletes them at once, asynq's default")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if *addr == "" || *n <= 0 || *c <= 0 || *body < 0 {
		fmt.Fprintln(os.Stderr, "usage: asynq-peer -redis host:port -mode enqueue|work [-n N] [-c C] [-body B] [-retention D]")
		os.Exit(2)
	}
	opt := asynq.RedisClientOpt{Addr: *addr, PoolSize: *c}
	var err error
	var elapsed time.Duration
	switch *mode {
	case "enqueue":
		elapsed, err = enqueue(opt, *n, *c, *body, *retention)
	case "work":
		elapsed, err = work(opt, *n, *c, *timeout)
	default:
		err = fmt.Errorf("unknown mode %q (enqueue or work)", *mode)
	}
	if err != nil {
		log.Fatalf("asynq-peer: %v", err)
	}
	fmt.Printf("asynq %s n=%d c=%d rate=%.0f/s elapsed=%s\n", *mode, *n, *c, float64(*n)/elapsed.Seconds(), elapsed.Round(time.Millisecond))
}

// enqueue puts n tasks from c goroutines sharing one client (asynq's
// client is safe for concurrent use and pools its connections).
func enqueue(opt asynq.RedisClientOpt, n, c, body int, retention time.Duration) (time.Duration, error) {
	client := asynq.NewClient(opt)
	defer client.Close()
	payload := []byte(strings.Repeat("x", body))
	var opts []asynq.Option
	if retention > 0 {
		opts = append(opts, asynq.Retention(retention))
	}
	var next atomic.Int64
	var first error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if _, err := client.Enqueue(asynq.NewTask("bench", payload), opts...); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start), first
}

// work runs an asynq server with c workers until n tasks were processed.
func work(opt asynq.RedisClientOpt, n, c int, timeout time.Duration) (time.Duration, error) {
	srv := asynq.NewServer(opt, asynq.Config{
		Concurrency: c,
		Logger:      quiet{},
		LogLevel:    asynq.ErrorLevel,
	})
	var done atomic.Int64
	all := make(chan struct{})
	var once sync.Once
	mux := asynq.NewServeMux()
	mux.HandleFunc("bench", func(context.Context, *asynq.Task) error {
		if done.Add(1) == int64(n) {
			once.Do(func() { close(all) })
		}
		return nil
	})
	start := time.Now()
	if err := srv.Start(mux); err != nil {
		return 0, err
	}
	defer srv.Shutdown()
	select {
	case <-all:
		return time.Since(start), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("processed %d of %d tasks in %s", done.Load(), n, timeout)
	}
}

// quiet drops asynq's info logs, which would otherwise interleave with the
// benchmark's lines; errors still go to stderr.
type quiet struct{}

func (quiet) Debug(...any)   {}
func (quiet) Info(...any)    {}
func (quiet) Warn(...any)    {}
func (quiet) Error(a ...any) { log.Print(a...) }
func (quiet) Fatal(a ...any) { log.Fatal(a...) }
