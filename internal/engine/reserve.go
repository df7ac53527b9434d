package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// ReserveRequest asks for up to N ready jobs of any of Topics, waiting up
// to Wait for one to become ready.
type ReserveRequest struct {
	Topics []string
	N      int           // 1 to delayq.MaxReserveN; 0 means 1
	Wait   time.Duration // 0 answers at once; at most Config.MaxWait
	// By names who reserves, kept in each job's attempt (Job.History):
	// the caller's principal, or its connection when it has none.
	By string
}

// Reserve hands out up to r.N ready jobs, in priority-then-seq order. It
// returns as soon as at least one job is ready, or with no jobs when the
// wait runs out or the engine drains. When ctx ends while jobs are being
// reserved, the jobs are given back (GiveBack), so a consumer that went
// away loses nothing and costs the jobs no attempt.
func (e *Engine) Reserve(ctx context.Context, r ReserveRequest) ([]*delayq.Job, error) {
	jobs, err := e.reserve(ctx, r)
	return jobs, e.recordN("reserve", len(jobs), err)
}

func (e *Engine) reserve(ctx context.Context, r ReserveRequest) ([]*delayq.Job, error) {
	if err := e.checkReserve(&r); err != nil {
		return nil, err
	}
	if e.Draining() {
		return nil, delayq.ErrDraining
	}
	jobs, err := e.reserveNow(ctx, r)
	if err != nil || len(jobs) > 0 || r.Wait <= 0 {
		return jobs, err
	}
	return e.waitReserve(ctx, r)
}

// waitReserve long-polls. The waiter is parked before each store attempt,
// so a job made ready between the attempt and the wait still wakes it.
func (e *Engine) waitReserve(ctx context.Context, r ReserveRequest) ([]*delayq.Job, error) {
	if err := e.enterWait(); err != nil {
		return nil, err
	}
	defer e.exitWait()
	timer := time.NewTimer(r.Wait)
	defer timer.Stop()
	e.metrics.Waiters(1)
	defer e.metrics.Waiters(-1)
	for {
		w := e.waiters.add(r.Topics)
		jobs, err := e.reserveNow(ctx, r)
		if err != nil || len(jobs) > 0 {
			e.leave(w)
			return jobs, err
		}
		select {
		case <-w.ch:
			continue
		case <-timer.C:
		case <-ctx.Done():
		case <-e.draining:
		}
		e.leave(w)
		return nil, ctx.Err()
	}
}

// leave unparks w and hands on a wake-up it got but will not use.
func (e *Engine) leave(w *waiter) {
	if topic := e.waiters.remove(w); topic != "" {
		e.waiters.wake(topic, 1)
	}
}

func (e *Engine) reserveNow(ctx context.Context, r ReserveRequest) ([]*delayq.Job, error) {
	// exact: the store truncates it to act at, and rounds the deadline up
	// from it, so the TTR runs from this instant (store.BeginTTR).
	now := time.Now()
	jobs, err := e.st.Reserve(ctx, store.ReserveParams{Topics: r.Topics, Max: r.N, Now: now, By: r.By})
	if err != nil || len(jobs) == 0 {
		return nil, err
	}
	if ctx.Err() != nil {
		e.giveBack(jobs...)
		return nil, ctx.Err()
	}
	for _, j := range jobs {
		e.metrics.ReadyWait(max(now.Sub(j.Due), 0))
	}
	e.announce(jobs...)
	return jobs, nil
}

func (e *Engine) checkReserve(r *ReserveRequest) error {
	if len(r.Topics) == 0 {
		return delayq.Invalid(delayq.CodeBadTopics, "topics", "name at least one topic")
	}
	if len(r.Topics) > e.cfg.MaxReserveTopics {
		return delayq.Invalid(delayq.CodeTooManyTopics, "topics", "%d topics, at most %d", len(r.Topics), e.cfg.MaxReserveTopics)
	}
	for _, t := range r.Topics {
		if err := delayq.CheckTopic(t); err != nil {
			return err
		}
	}
	if r.N == 0 {
		r.N = 1
	}
	if r.N < 0 || r.N > delayq.MaxReserveN {
		return delayq.Invalid(delayq.CodeBadN, "n", "%d is not between 1 and %d", r.N, delayq.MaxReserveN)
	}
	if r.Wait < 0 {
		return delayq.Invalid(delayq.CodeBadWait, "wait", "%s is negative", r.Wait)
	}
	if r.Wait > e.cfg.MaxWait {
		return delayq.Invalid(delayq.CodeWaitTooLong, "wait", "%s is over the maximum of %s", r.Wait, e.cfg.MaxWait)
	}
	return nil
}

func itoa(i int) string { return strconv.Itoa(i) }
