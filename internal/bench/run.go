package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// stampSize is the prefix of every lateness body: the due time asked for,
// as 20 decimal digits of Unix nanoseconds (ASCII, so HTTP carries it as a
// plain string).
const stampSize = 20

type runner struct {
	o      Options
	dial   func() (driver, error)
	topics []string // Options.topicNames
}

// topicOf is the topic of the put call that starts at job i: puts go
// round-robin over the run's topics, one call (a whole batch) at a time.
func (r *runner) topicOf(i int) string {
	return r.topics[(i/r.o.Batch)%len(r.topics)]
}

func (r *runner) run(ctx context.Context) (*Result, error) {
	switch r.o.Mode {
	case ModePut:
		return r.runPut(ctx)
	case ModeReserve:
		return r.runReserve(ctx)
	default:
		return r.runLateness(ctx)
	}
}

// workers runs fn on C connections and returns the first error.
func (r *runner) workers(ctx context.Context, fn func(ctx context.Context, d driver) error) error {
	return r.workersN(ctx, r.o.C, fn)
}

// workersN runs fn on n connections and returns the first error.
func (r *runner) workersN(ctx context.Context, n int, fn func(ctx context.Context, d driver) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for range n {
		d, err := r.dial()
		if err != nil {
			return fmt.Errorf("bench: connect: %w", err)
		}
		wg.Go(func() {
			defer d.close()
			if err := fn(ctx, d); err != nil {
				errs <- err
				cancel()
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// body is the body every job starts from (stamped for lateness modes).
func (r *runner) body() []byte {
	body := make([]byte, r.o.BodySize)
	for i := range body {
		body[i] = 'x'
	}
	return body
}

// putAll puts n jobs with the given due times from C connections in
// batches, recording each call's latency when lat is not nil.
func (r *runner) putAll(ctx context.Context, dues func(i int) time.Time, batch int, lat *samples) error {
	body := r.body()
	var next atomic.Int64
	return r.workers(ctx, func(ctx context.Context, d driver) error {
		for {
			start := int(next.Add(int64(batch))) - batch
			if start >= r.o.N {
				return nil
			}
			ds := make([]time.Time, 0, batch)
			for i := start; i < min(start+batch, r.o.N); i++ {
				ds = append(ds, dues(i))
			}
			t0 := time.Now()
			if err := d.put(ctx, r.topicOf(start), body, ds); err != nil {
				return err
			}
			lat.add(time.Since(t0))
		}
	})
}

func (r *runner) runPut(ctx context.Context) (*Result, error) {
	lat := newSamples(r.o.N)
	now := time.Now()
	due := func(int) time.Time { return now }
	if r.o.Delay > 0 || r.o.Spread > 0 {
		due = func(int) time.Time { return now.Add(r.o.Delay + rand.N(r.o.Spread+1)) }
	}
	start := time.Now()
	if err := r.putAll(ctx, due, r.o.Batch, lat); err != nil {
		return nil, err
	}
	return lat.result(r.o.N, time.Since(start)), nil
}

func (r *runner) runReserve(ctx context.Context) (*Result, error) {
	now := time.Now()
	if err := r.putAll(ctx, func(int) time.Time { return now }, r.o.Batch, nil); err != nil {
		return nil, fmt.Errorf("bench: preload: %w", err)
	}
	lat := newSamples(r.o.N)
	var done atomic.Int64
	var end atomic.Int64 // Unix ns when the run's last job was finished
	var conns atomic.Int64
	start := time.Now()
	err := r.workers(ctx, func(ctx context.Context, d driver) error {
		topics := r.topics
		if r.o.OwnTopic {
			k := int(conns.Add(1) - 1)
			topics = r.topics[k%len(r.topics) : k%len(r.topics)+1]
		}
		for done.Load() < int64(r.o.N) {
			t0 := time.Now()
			jobs, err := d.reserve(ctx, topics, r.o.Take, time.Second)
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				continue
			}
			if err := d.finish(ctx, jobs); err != nil {
				return err
			}
			// With Take > 1 every job of a reserve counts the whole
			// reserve and its (batch) finish.
			for range jobs {
				lat.add(time.Since(t0))
			}
			if done.Add(int64(len(jobs))) >= int64(r.o.N) {
				end.CompareAndSwap(0, time.Now().UnixNano())
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// The rate stops at the run's last finish: a worker that found
	// nothing left still waits out its reserve's timeout before it
	// returns, and that idle second is not the queue's.
	return lat.result(r.o.N, time.Unix(0, end.Load()).Sub(start)), nil
}

// runLateness puts every job first, due from Lead after the start, then
// consumes them and measures how late each arrives after its due time.
// A spread with a Delay puts during the run instead (runPaced).
func (r *runner) runLateness(ctx context.Context) (*Result, error) {
	if r.o.Mode == ModeSpread && r.o.Delay > 0 {
		return r.runPaced(ctx)
	}
	first := time.Now().Add(r.o.Lead)
	dues := func(int) time.Time { return first }
	if r.o.Mode == ModeSpread {
		step := time.Second / time.Duration(r.o.Rate)
		dues = func(i int) time.Time { return first.Add(time.Duration(i) * step) }
	}
	if err := r.putAll(ctx, dues, r.o.Batch, nil); err != nil {
		return nil, fmt.Errorf("bench: put: %w", err)
	}
	if late := time.Since(first); late > 0 {
		return nil, fmt.Errorf("bench: putting %d jobs took %s past the first due time; raise --lead or --batch", r.o.N, late)
	}
	c := newConsumption(r.o.N)
	if err := r.workers(ctx, c.consume(r)); err != nil {
		return nil, err
	}
	return c.result(r.o.N, first), nil
}

// runPaced is the spread as issue 8 words it: Producers connections put
// Rate jobs/s for Duration, each due Delay after it is sent, while C
// consumers take them. The due time asked for is the send time plus Delay,
// so beanstalkd's whole-second delays add no rounding to the lateness, and
// the server fires while it is also taking puts.
func (r *runner) runPaced(ctx context.Context) (*Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body := r.body()
	step := time.Second / time.Duration(r.o.Rate)
	// The first put waits a moment so the consumers are connected and
	// waiting when the first job falls due.
	start := time.Now().Add(100 * time.Millisecond)
	var next atomic.Int64
	produced := make(chan error, 1)
	go func() {
		produced <- r.workersN(ctx, r.o.Producers, func(ctx context.Context, d driver) error {
			for {
				i := int(next.Add(int64(r.o.Batch))) - r.o.Batch
				if i >= r.o.N {
					return nil
				}
				t := time.NewTimer(time.Until(start.Add(time.Duration(i) * step)))
				select {
				case <-ctx.Done():
					t.Stop()
					return ctx.Err()
				case <-t.C:
				}
				due := time.Now().Add(r.o.Delay)
				dues := make([]time.Time, min(r.o.Batch, r.o.N-i))
				for k := range dues {
					dues[k] = due
				}
				if err := d.put(ctx, r.topicOf(i), body, dues); err != nil {
					cancel()
					return fmt.Errorf("bench: put: %w", err)
				}
			}
		})
	}()
	c := newConsumption(r.o.N)
	err := r.workers(ctx, c.consume(r))
	if err != nil {
		cancel()
	}
	if perr := <-produced; perr != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = perr
	}
	if err != nil {
		return nil, err
	}
	return c.result(r.o.N, start.Add(r.o.Delay)), nil
}

// consumption is the consuming side of a lateness run, shared by its
// consumers.
type consumption struct {
	lat         *samples
	done, early atomic.Int64
	last        atomic.Int64 // Unix ns of the latest receipt
	lastDue     atomic.Int64 // Unix ns of the latest due time received
}

func newConsumption(n int) *consumption { return &consumption{lat: newSamples(n)} }

// consume reserves, measures and finishes jobs until every job of the run
// is done.
func (c *consumption) consume(r *runner) func(ctx context.Context, d driver) error {
	return func(ctx context.Context, d driver) error {
		for c.done.Load() < int64(r.o.N) {
			jobs, err := d.reserve(ctx, r.topics, r.o.Take, time.Second)
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				continue
			}
			now := time.Now()
			for _, j := range jobs {
				due := stampTime(j.body)
				late := now.Sub(due)
				if late < 0 {
					c.early.Add(1)
				}
				c.lat.add(late)
				for old := c.lastDue.Load(); old < due.UnixNano() && !c.lastDue.CompareAndSwap(old, due.UnixNano()); {
					old = c.lastDue.Load()
				}
			}
			c.last.Store(now.UnixNano())
			if err := d.finish(ctx, jobs); err != nil {
				return err
			}
			c.done.Add(int64(len(jobs)))
		}
		return nil
	}
}

// result is the run's figures: throughput from the first due time to the
// last receipt, and the drain from the latest due time received to the last
// receipt.
func (c *consumption) result(n int, firstDue time.Time) *Result {
	last := time.Unix(0, c.last.Load())
	res := c.lat.result(n, last.Sub(firstDue))
	res.Early = int(c.early.Load())
	res.Drain = last.Sub(time.Unix(0, c.lastDue.Load()))
	return res
}

// stamp writes due into the start of body.
func stamp(body []byte, due time.Time) []byte {
	b := append([]byte(nil), body...)
	s := fmt.Sprintf("%0*d", stampSize, due.UnixNano())
	copy(b, s)
	return b
}

func stampTime(body []byte) time.Time {
	if len(body) < stampSize {
		return time.Time{}
	}
	n, err := strconv.ParseInt(string(body[:stampSize]), 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n)
}

// samples collects durations from many goroutines.
type samples struct {
	mu sync.Mutex
	d  []time.Duration
}

func newSamples(n int) *samples { return &samples{d: make([]time.Duration, 0, n)} }

func (s *samples) add(d time.Duration) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
}

func (s *samples) result(jobs int, elapsed time.Duration) *Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	slices.Sort(s.d)
	res := &Result{Jobs: jobs, Elapsed: elapsed}
	if elapsed > 0 {
		res.PerSec = float64(jobs) / elapsed.Seconds()
	}
	if len(s.d) > 0 {
		res.P50, res.P99, res.P999 = pct(s.d, 0.50), pct(s.d, 0.99), pct(s.d, 0.999)
		res.Max = s.d[len(s.d)-1]
	}
	return res
}

func pct(sorted []time.Duration, p float64) time.Duration {
	i := int(float64(len(sorted))*p+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
