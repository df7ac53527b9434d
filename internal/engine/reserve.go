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
	if r.Wait <= 0 {
		return e.reserveNow(ctx, r)
	}
	return e.waitReserve(ctx, r)
}

// waitReserve long-polls. The waiter is parked before each store attempt,
// so a job made ready between the attempt and the wait still wakes it;
// over a store.WaitMarker its topics are marked between the two
// (markWaiting), so a job made ready by another instance after the
// attempt is announced to it too.
// Its first attempt is the reserve's first: a store attempt before
// parking, when it finds nothing, is a second empty one (a store round
// trip or two) for every consumer that comes back for more.
func (e *Engine) waitReserve(ctx context.Context, r ReserveRequest) ([]*delayq.Job, error) {
	if err := e.enterWait(); err != nil {
		// Too many wait already: a job ready now is still handed out.
		jobs, rerr := e.reserveNow(ctx, r)
		if rerr != nil || len(jobs) > 0 {
			return jobs, rerr
		}
		return nil, err
	}
	defer e.exitWait()
	timer := time.NewTimer(r.Wait)
	defer timer.Stop()
	e.metrics.Waiters(1)
	defer e.metrics.Waiters(-1)
	var woke string // the topic of the wake-up that led to this attempt
	var wokeFor int // how many of its jobs that wake-up counted on this reserve for
	for {
		w := e.waiters.add(r.Topics, r.N, r.By)
		e.markWaiting(ctx, r.Topics)
		jobs, err := e.reserveNow(ctx, r)
		if err != nil || len(jobs) > 0 {
			if handed := e.leave(w); len(handed) > 0 {
				// A timer step handed w jobs while the store attempt
				// ran: this reserve has its answer already.
				e.giveBack(handed...)
			}
			if n := handOn(woke, wokeFor, r.N, jobs, err); n > 0 {
				e.waiters.wake(woke, n)
			}
			return jobs, err
		}
		select {
		case <-w.ch:
			if handed := e.waiters.takeHanded(w); len(handed) > 0 {
				return e.takeHanded(ctx, handed)
			}
			woke, wokeFor = w.signaled, w.jobs
			continue
		case <-timer.C:
		case <-ctx.Done():
		case <-e.draining:
		}
		if handed := e.leave(w); len(handed) > 0 {
			// Handed as the wait ran out: the caller is still there
			// unless ctx ended.
			return e.takeHanded(ctx, handed)
		}
		return nil, ctx.Err()
	}
}

// leave unparks w, hands on a wake-up it got but will not use, and
// returns the jobs a timer step handed it that it has not taken.
func (e *Engine) leave(w *waiter) []*delayq.Job {
	topic, n, handed := e.waiters.remove(w)
	if topic != "" {
		e.waiters.wake(topic, n)
	}
	return handed
}

// takeHanded answers a reserve with the jobs a timer step reserved for
// it in its own store write (store.TickParams.Claim), or gives them back
// when the caller has gone.
func (e *Engine) takeHanded(ctx context.Context, jobs []*delayq.Job) ([]*delayq.Job, error) {
	if ctx.Err() != nil {
		e.giveBack(jobs...)
		return nil, ctx.Err()
	}
	now := time.Now()
	for _, j := range jobs {
		e.metrics.ReadyWait(max(now.Sub(j.Due), 0))
	}
	e.announce(jobs...)
	return jobs, nil
}

// handOn is how many jobs of the wake-up that woke a reserve (topic
// woke, counted on it for wokeFor jobs) the reserve leaves to the next
// waiter, now that it got jobs or err. A wake-up counts on each waiter
// for as many jobs as it takes (waiters.wake), so a reserve must pass on
// what it did not take: all of it when it failed; when it came back
// full (take jobs, perhaps of its other topics first), the jobs of woke
// it did not take, which may still be ready. A reserve that came back
// short took every job of woke it could see: the rest were taken by
// others, or made ready after it looked and woke waiters of their own.
func handOn(woke string, wokeFor, take int, jobs []*delayq.Job, err error) int {
	if woke == "" {
		return 0
	}
	if err != nil {
		return wokeFor
	}
	if len(jobs) < take {
		return 0
	}
	n := wokeFor
	for _, j := range jobs {
		if j.Topic == woke {
			n--
		}
	}
	return max(n, 0)
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
