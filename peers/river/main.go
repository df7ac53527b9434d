// Command riverbench drives River (riverqueue.com) on a PostgreSQL
// database the same way scripts/bench.sh drives delayq over Postgres, so
// the two can be compared side by side in one run. It lives in a module
// of its own: the delayq server never depends on River.
//
//	riverbench -url postgres://... -mode put  -jobs 30000 -conc 32
//	riverbench -url postgres://... -mode work -jobs 30000 -conc 32
//	riverbench -url postgres://... -mode late -rate 1000 -spread 5s
//	riverbench -url postgres://... -mode puttx -jobs 5000 -conc 8
//
// put inserts jobs one Insert each from conc goroutines; work inserts
// them first (InsertMany, not timed) and times a client with conc
// workers until every job is completed; late schedules rate jobs a
// second spread uniformly over spread, starting two seconds ahead, and
// reports each job's lateness (start of work minus scheduled time);
// puttx times an application transaction of one INSERT, alone and with
// a River InsertTx in it. Every mode prints one line of key=value pairs.
// River's settings are its defaults unless a flag says otherwise.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// benchArgs is the job every mode puts: a body of the bench's size.
type benchArgs struct {
	Body string `json:"body"`
}

func (benchArgs) Kind() string { return "bench" }

// benchWorker counts finished jobs and, in late mode, records lateness.
type benchWorker struct {
	river.WorkerDefaults[benchArgs]
	done     atomic.Int64
	all      chan struct{}
	want     int64
	mu       sync.Mutex
	lateness []time.Duration
	record   bool
}

func (w *benchWorker) Work(ctx context.Context, job *river.Job[benchArgs]) error {
	if w.record {
		late := time.Since(job.ScheduledAt)
		w.mu.Lock()
		w.lateness = append(w.lateness, late)
		w.mu.Unlock()
	}
	if w.done.Add(1) == w.want {
		close(w.all)
	}
	return nil
}

func main() {
	url := flag.String("url", os.Getenv("DATABASE_URL"), "PostgreSQL URL")
	mode := flag.String("mode", "put", "put, work, late or puttx")
	jobs := flag.Int("jobs", 30000, "jobs to put or work")
	conc := flag.Int("conc", 32, "producers (put) or workers (work, late)")
	size := flag.Int("size", 100, "body bytes")
	rate := flag.Int("rate", 1000, "late: jobs due per second")
	spread := flag.Duration("spread", 5*time.Second, "late: how long jobs keep coming due")
	limit := flag.Duration("timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if *url == "" {
		fail(errors.New("-url (or DATABASE_URL) is required"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), *limit)
	defer cancel()
	pool, err := pgxpool.New(ctx, poolSize(*url, *conc))
	if err != nil {
		fail(err)
	}
	defer pool.Close()
	if err := migrate(ctx, pool); err != nil {
		fail(fmt.Errorf("river migrate: %w", err))
	}
	body := benchArgs{Body: fill(*size)}
	switch *mode {
	case "put":
		err = put(ctx, pool, body, *jobs, *conc)
	case "work":
		err = work(ctx, pool, body, *jobs, *conc)
	case "late":
		err = late(ctx, pool, body, *rate, *spread, *conc)
	case "puttx":
		err = putTx(ctx, pool, body, *jobs, *conc)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "riverbench:", err)
	os.Exit(1)
}

func fill(n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = 'x'
	}
	return string(b)
}

// poolSize gives the pool a connection per goroutine plus River's own.
func poolSize(url string, conc int) string {
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return fmt.Sprintf("%s%spool_max_conns=%d", url, sep, conc+10)
}

func migrate(ctx context.Context, pool *pgxpool.Pool) error {
	m, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
	return err
}

// empty removes every job a former run left, so each mode starts alike.
func empty(ctx context.Context, pool *pgxpool.Pool) error {
	_, err := pool.Exec(ctx, "TRUNCATE river_job")
	return err
}

func newClient(pool *pgxpool.Pool, w *benchWorker, conc int) (*river.Client[pgx.Tx], error) {
	cfg := &river.Config{}
	if w != nil {
		cfg.Workers = river.NewWorkers()
		river.AddWorker(cfg.Workers, w)
	}
	if w != nil && conc > 0 {
		cfg.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: conc}}
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}

func put(ctx context.Context, pool *pgxpool.Pool, body benchArgs, n, conc int) error {
	if err := empty(ctx, pool); err != nil {
		return err
	}
	c, err := newClient(pool, nil, 0)
	if err != nil {
		return err
	}
	start := time.Now()
	err = fanOut(n, conc, func(int) error {
		_, err := c.Insert(ctx, body, nil)
		return err
	})
	if err != nil {
		return err
	}
	el := time.Since(start)
	fmt.Printf("peer=river mode=put jobs=%d conc=%d seconds=%.3f per_s=%.0f\n", n, conc, el.Seconds(), float64(n)/el.Seconds())
	return nil
}

func work(ctx context.Context, pool *pgxpool.Pool, body benchArgs, n, conc int) error {
	if err := empty(ctx, pool); err != nil {
		return err
	}
	w := &benchWorker{all: make(chan struct{}), want: int64(n)}
	c, err := newClient(pool, w, conc)
	if err != nil {
		return err
	}
	for i := 0; i < n; i += 1000 {
		batch := make([]river.InsertManyParams, 0, 1000)
		for k := i; k < min(n, i+1000); k++ {
			batch = append(batch, river.InsertManyParams{Args: body})
		}
		if _, err := c.InsertMany(ctx, batch); err != nil {
			return err
		}
	}
	start := time.Now()
	if err := c.Start(ctx); err != nil {
		return err
	}
	select {
	case <-w.all:
	case <-ctx.Done():
		return fmt.Errorf("worked %d of %d jobs: %w", w.done.Load(), n, ctx.Err())
	}
	el := time.Since(start)
	if err := c.Stop(ctx); err != nil {
		return err
	}
	fmt.Printf("peer=river mode=work jobs=%d conc=%d seconds=%.3f per_s=%.0f\n", n, conc, el.Seconds(), float64(n)/el.Seconds())
	return nil
}

func late(ctx context.Context, pool *pgxpool.Pool, body benchArgs, rate int, spread time.Duration, conc int) error {
	if err := empty(ctx, pool); err != nil {
		return err
	}
	n := int(float64(rate) * spread.Seconds())
	w := &benchWorker{all: make(chan struct{}), want: int64(n), record: true}
	c, err := newClient(pool, w, conc)
	if err != nil {
		return err
	}
	if err := c.Start(ctx); err != nil {
		return err
	}
	first := time.Now().Add(2 * time.Second)
	step := spread / time.Duration(n)
	for i := 0; i < n; i += 500 {
		batch := make([]river.InsertManyParams, 0, 500)
		for k := i; k < min(n, i+500); k++ {
			batch = append(batch, river.InsertManyParams{Args: body, InsertOpts: &river.InsertOpts{ScheduledAt: first.Add(time.Duration(k) * step)}})
		}
		if _, err := c.InsertMany(ctx, batch); err != nil {
			return err
		}
	}
	select {
	case <-w.all:
	case <-ctx.Done():
		return fmt.Errorf("worked %d of %d jobs: %w", w.done.Load(), n, ctx.Err())
	}
	if err := c.Stop(ctx); err != nil {
		return err
	}
	l := w.lateness
	slices.Sort(l)
	q := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))]) / 1e6 }
	fmt.Printf("peer=river mode=late jobs=%d rate=%d min_ms=%.1f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f\n",
		n, rate, float64(l[0])/1e6, q(0.5), q(0.99), float64(l[len(l)-1])/1e6)
	return nil
}

// putTx times an application's transaction of one INSERT into its own
// table, alone and with River's InsertTx beside it.
func putTx(ctx context.Context, pool *pgxpool.Pool, body benchArgs, n, conc int) error {
	if err := empty(ctx, pool); err != nil {
		return err
	}
	if _, err := pool.Exec(ctx, "CREATE TABLE IF NOT EXISTS bench_orders (id bigserial PRIMARY KEY, note text NOT NULL)"); err != nil {
		return err
	}
	c, err := newClient(pool, nil, 0)
	if err != nil {
		return err
	}
	run := func(withJob bool) (time.Duration, error) {
		start := time.Now()
		err := fanOut(n, conc, func(int) error {
			tx, err := pool.Begin(ctx)
			if err != nil {
				return err
			}
			defer tx.Rollback(ctx)
			if _, err := tx.Exec(ctx, "INSERT INTO bench_orders (note) VALUES ($1)", "order"); err != nil {
				return err
			}
			if withJob {
				if _, err := c.InsertTx(ctx, tx, body, &river.InsertOpts{ScheduledAt: time.Now().Add(30 * time.Minute)}); err != nil {
					return err
				}
			}
			return tx.Commit(ctx)
		})
		return time.Since(start), err
	}
	alone, err := run(false)
	if err != nil {
		return err
	}
	with, err := run(true)
	if err != nil {
		return err
	}
	fmt.Printf("peer=river mode=puttx jobs=%d conc=%d tx_alone_per_s=%.0f tx_with_job_per_s=%.0f cost_ratio=%.2f\n",
		n, conc, float64(n)/alone.Seconds(), float64(n)/with.Seconds(), with.Seconds()/alone.Seconds())
	return nil
}

// fanOut runs f for 0..n-1 on conc goroutines and returns the first error.
func fanOut(n, conc int, f func(i int) error) error {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for g := 0; g < conc; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}
