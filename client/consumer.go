package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"

	"github.com/delayq/delayq"
)

// Handler processes one job. Returning nil finishes (deletes) the job; an
// error releases it to run again after a backoff; Permanent(err) buries it.
// A panic counts as an error. ctx ends a safety margin before the job's TTR
// runs out, and when the consumer shuts down after its grace period.
type Handler func(ctx context.Context, j *Job) error

// Consumer reserves jobs from one or more topics and runs a handler on
// each, up to Concurrency at a time. Delivery is at least once: a handler
// must tolerate seeing a job again (after a crash, a lost answer or a TTR
// that ran out).
type Consumer struct {
	c   *Client
	cfg consumerConfig
	// finisher batches the workers' finishes while Consume runs.
	finisher *finisher
}

// NewConsumer returns a Consumer of topic on the servers at addrs. It
// panics on a bad address (see NewClient) or topic list.
func NewConsumer(addrs []string, topic string, opts ...ConsumerOption) *Consumer {
	cfg := consumerConfig{
		topics: []string{topic}, concurrency: 1, wait: 30 * time.Second,
		grace: 30 * time.Second, backoff: DefaultBackoff, log: slog.New(slog.DiscardHandler),
		finishWindow: finishWindow, finishMax: finishMax,
	}
	for _, o := range opts {
		o.applyConsumer(&cfg)
	}
	cl := cfg.client
	if cl == nil {
		cl = New(addrs, cfg.clientOpts...)
	}
	return &Consumer{c: cl, cfg: cfg}
}

// Client returns the low-level client the consumer uses.
func (cs *Consumer) Client() *Client { return cs.c }

// Consume runs h on reserved jobs until ctx is cancelled, then stops
// reserving, lets running handlers finish for up to the grace period,
// cancels the rest and releases their jobs, and returns nil. It returns
// early only for an error retrying cannot fix (a bad topic name); network
// errors are logged and retried with backoff. Consume may be called once
// at a time per Consumer.
//
// It never holds a job it cannot start: each reserve asks for at most as
// many jobs as there are idle workers, and long-polls while there are none
// ready.
func (cs *Consumer) Consume(ctx context.Context, h Handler) error {
	for _, t := range cs.cfg.topics {
		if err := delayq.CheckTopic(t); err != nil {
			return err
		}
	}
	// Handlers run under work, not ctx: cancelling ctx lets them finish.
	work, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	defer stop(nil)
	slots := make(chan struct{}, cs.cfg.concurrency)
	for range cs.cfg.concurrency {
		slots <- struct{}{}
	}
	cs.finisher = newFinisher(cs.c, cs.cfg.finishWindow, cs.cfg.finishMax)
	defer func() { cs.finisher.close() }()
	var wg sync.WaitGroup
	err := cs.reserveLoop(ctx, work, h, slots, &wg)
	cs.finisher.hurry()
	cs.drain(&wg, stop)
	return err
}

// reserveLoop reserves jobs while there are free slots and starts a
// worker for each, until ctx ends.
func (cs *Consumer) reserveLoop(ctx, work context.Context, h Handler, slots chan struct{}, wg *sync.WaitGroup) error {
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-slots:
		}
		n := 1 + takeFree(slots, cs.cfg.concurrency-1)
		sent := time.Now()
		jobs, err := cs.c.Reserve(ctx, cs.cfg.topics, n, cs.cfg.wait)
		recv := time.Now()
		giveBack(slots, n-len(jobs))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, delayq.ErrInvalid) {
				return fmt.Errorf("client: consume %v: %w", cs.cfg.topics, err)
			}
			failures++
			d := nominal(100*time.Millisecond, 5*time.Second, failures)
			cs.cfg.log.WarnContext(ctx, "delayq consumer: reserve failed", "topics", cs.cfg.topics, "err", err, "retry_in", d)
			if sleepCtx(ctx, d) != nil {
				return nil
			}
			continue
		}
		failures = 0
		for _, dj := range jobs {
			cs.start(ctx, work, h, dj, reservedAt(sent, recv, dj.TTR, cs.cfg.margin), slots, wg)
		}
	}
}

// reservedAt estimates, by the local clock, when the server reserved a job
// from a reserve sent at sent and answered at recv, erring early so the
// handler's deadline comes before the server's whatever the clocks say.
// The server reserves just before it answers, so for a long poll the
// reservation is near recv: allow half the safety margin for the answer's
// trip. A quick answer is bounded by sent, which is exact.
func reservedAt(sent, recv time.Time, ttr, configured time.Duration) time.Time {
	at := recv.Add(-margin(ttr, configured) / 2)
	if at.Before(sent) {
		return sent
	}
	return at
}

// start runs a worker for dj, or releases dj at once when ctx has ended
// meanwhile (a job that was never started is handed straight back).
func (cs *Consumer) start(ctx, work context.Context, h Handler, dj *delayq.Job, sent time.Time, slots chan struct{}, wg *sync.WaitGroup) {
	if ctx.Err() != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cs.c.timeout)
		defer cancel()
		if _, err := cs.c.Release(actx, dj.ID, dj.Reservation, 0, nil); err != nil {
			cs.cfg.log.Warn("delayq consumer: release of unstarted job failed", "id", dj.ID, "err", err)
		}
		slots <- struct{}{}
		return
	}
	j := newJob(cs.c, dj, sent, margin(dj.TTR, cs.cfg.margin))
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer func() { slots <- struct{}{} }()
		cs.run(work, h, j)
	}()
}

// drain waits for running handlers for the grace period, then cancels
// their contexts and waits for them to return.
func (cs *Consumer) drain(wg *sync.WaitGroup, stop context.CancelCauseFunc) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(cs.cfg.grace)
	defer t.Stop()
	select {
	case <-done:
		return
	case <-t.C:
	}
	cs.cfg.log.Warn("delayq consumer: grace period over, cancelling running handlers", "grace", cs.cfg.grace)
	stop(ErrShutdown)
	<-done
}

// takeFree takes up to max more free slots without waiting.
func takeFree(slots chan struct{}, max int) int {
	n := 0
	for n < max {
		select {
		case <-slots:
			n++
		default:
			return n
		}
	}
	return n
}

// giveBack returns n slots.
func giveBack(slots chan struct{}, n int) {
	for range n {
		slots <- struct{}{}
	}
}

// run runs the handler on j under a context that the keeper cancels
// before the TTR runs out, then settles the job by the handler's result.
func (cs *Consumer) run(work context.Context, h Handler, j *Job) {
	hctx, cancel := context.WithCancelCause(work)
	defer cancel(nil)
	done := make(chan struct{})
	kept := make(chan struct{})
	go func() {
		defer close(kept)
		cs.keep(hctx, j, cancel, done)
	}()
	if cs.cfg.hooks.Start != nil {
		cs.cfg.hooks.Start(j)
	}
	began := time.Now()
	err := safeCall(jobCtx{hctx, j}, h, j)
	took := time.Since(began)
	close(done)
	<-kept
	cs.settle(context.Cause(hctx), j, err, took)
}

// safeCall runs h, turning a panic into an error.
func safeCall(ctx context.Context, h Handler, j *Job) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("client: handler panicked on job %q: %v\n%s", j.ID, r, debug.Stack())
		}
	}()
	return h(ctx, j)
}
