package engine

import (
	"context"
	"runtime"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/store"
)

// tickRetry is how long the timer waits after a failed step before it
// tries again, so a store outage does not become a busy loop.
const tickRetry = 250 * time.Millisecond

// firstTickBatch is the most jobs the first store Tick of a timer step
// moves; the later Ticks of the same step move Config.TickBatch. Waiters
// are woken after each Tick, and a Tick holds the store while it stages
// its moves: when many jobs fall due at once (100,000 at one instant),
// a first Tick of 1,000 kept every consumer waiting for a thousand
// promotions (milliseconds) before the first job went out. 64 wakes a few
// dozen consumers at once and costs a burst a handful of extra Ticks.
const firstTickBatch = 64

// Run drives the timer until ctx is done: it asks the store to make due work
// ready, wakes the waiters of the topics that gained ready jobs, and sleeps
// until the next due time or until a put, release or update makes an
// earlier one (beanstalkd's prottick, without polling). If the store is a
// store.Notifier, Run also relays its events to waiters and the timer;
// if it is a store.WaitMarker, Run renews the marks of topics waited on.
func (e *Engine) Run(ctx context.Context) error {
	if n, ok := e.base.(store.Notifier); ok {
		events, err := n.Notify(ctx)
		if err != nil {
			return err
		}
		go e.relay(ctx, events)
		// Another instance may change a policy: reload on an interval.
		go e.refreshPolicies(ctx, e.cfg.PolicyRefresh)
	}
	if e.marker != nil {
		// Long waits keep their topics marked (waitmarks.go).
		go e.renewMarks(ctx)
	}
	var a alarm = newTimerAlarm()
	if e.cfg.PreciseTimer {
		a = newAlarm()
	}
	defer a.Close()
	a.Set(time.Now())
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-a.C():
		case <-e.wake:
		}
		a.Set(e.step(ctx))
	}
}

// step runs timer steps until nothing more is due now and returns when the
// next one is due. With nothing pending it returns a time far ahead; a put
// wakes the loop before then.
func (e *Engine) step(ctx context.Context) time.Time {
	e.mu.Lock()
	e.ticking = true
	e.mu.Unlock()
	next := e.tickUntilIdle(ctx)
	e.mu.Lock()
	e.ticking = false
	e.next = next
	e.mu.Unlock()
	if next.IsZero() {
		return time.Now().Add(time.Hour)
	}
	return next
}

func (e *Engine) tickUntilIdle(ctx context.Context) time.Time {
	batch := min(firstTickBatch, e.cfg.TickBatch)
	for ctx.Err() == nil {
		now := time.Now()
		var backoffs map[string]store.Backoff
		if set, err := e.policySet(ctx); err == nil {
			backoffs = set.backoffs
		} else if ctx.Err() == nil {
			// Better a TTR expiry ready at once than a timer that stops.
			e.log.Warn("timer step without topic backoffs: policies unreadable", "err", err)
		}
		var claimed []*waiter
		claim := func(ready map[string]int) []store.Take {
			claimed = e.waiters.claim(ready)
			takes := make([]store.Take, len(claimed))
			for i, w := range claimed {
				takes[i] = store.Take{Topics: w.topics, Max: w.take, Now: now, By: w.by}
			}
			return takes
		}
		res, err := e.st.Tick(ctx, store.TickParams{Now: now, Max: batch, Backoff: backoffs, Claim: claim})
		e.handOff(claimed, res, err)
		if err != nil {
			if ctx.Err() == nil && e.tickErrs.log(now, err) {
				e.log.Error("timer step failed; retrying", "err", err, "retry_in", tickRetry)
			}
			return now.Add(tickRetry)
		}
		e.tickErrs.clear()
		e.afterTick(res)
		if res.Next.IsZero() || res.Next.After(now) {
			return res.Next
		}
		// More is due. The consumers just woken take the store first:
		// they need a few jobs now, the next batch can follow.
		batch = e.cfg.TickBatch
		runtime.Gosched()
	}
	return time.Time{}
}

// handOff ends the claims of a Tick (store.TickParams.Claim): each
// claimed reserve gets the jobs the store reserved for it, or, with
// none (the Tick failed, or the jobs went to reserves before it), is
// signalled to try the store itself. The jobs of a reserve that left
// meanwhile go back, off the timer's goroutine.
func (e *Engine) handOff(claimed []*waiter, res *store.TickResult, err error) {
	for i, w := range claimed {
		var jobs []*delayq.Job
		if err == nil && i < len(res.Taken) {
			jobs = res.Taken[i]
		}
		if back := e.waiters.handOff(w, jobs); len(back) > 0 {
			go e.giveBack(back...)
		}
	}
}

// afterTick wakes waiters and records what a timer step did.
func (e *Engine) afterTick(res *store.TickResult) {
	for topic, n := range ttrExpired(res) {
		e.metrics.Timeouts(topic, n) // before the wake-ups, so a woken consumer sees it counted
	}
	// A job fails when it is buried; an expiry that leaves attempts is a
	// retry, not a failed job (docs/states.md).
	for topic, n := range res.BuriedByTopic {
		e.metrics.JobsFailed(topic, metrics.FailAttemptsExhausted, n)
	}
	for topic, n := range res.Ready {
		e.waiters.wake(topic, n)
	}
	for _, d := range res.Lateness {
		e.metrics.FireLateness(d)
	}
	e.metrics.Exhausted(res.Buried)
	if e.cfg.Fired != nil {
		for topic, ds := range res.LatenessByTopic {
			e.cfg.Fired(topic, ds)
		}
	}
}

// notifyDue tells the timer that something is due at due. It wakes the
// loop only when that is earlier than the step it sleeps towards, or when a
// step is running (the step may already have read past due).
func (e *Engine) notifyDue(due time.Time) {
	e.mu.Lock()
	send := e.ticking || e.next.IsZero() || due.Before(e.next)
	if send && !e.ticking {
		e.next = due
	}
	e.mu.Unlock()
	if send {
		select {
		case e.wake <- struct{}{}:
		default:
		}
	}
}

// relay turns a shared store's events into local wake-ups.
func (e *Engine) relay(ctx context.Context, events <-chan store.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if ev.Topic != "" {
				e.waiters.wake(ev.Topic, max(ev.Count, 1))
			}
			if !ev.Due.IsZero() {
				e.notifyDue(ev.Due)
			}
		}
	}
}

// repeatLog decides which of a repeating error's occurrences to log: a
// store that cannot take writes (a read-only start on a full disk) fails
// every timer step, four a second, for as long as it lasts, and one line
// a minute says as much. Used by the timer goroutine only.
type repeatLog struct {
	msg  string
	last time.Time
}

// log reports whether err, seen at now, should be logged: when it differs
// from the last one logged or a minute has passed.
func (r *repeatLog) log(now time.Time, err error) bool {
	if msg := err.Error(); msg != r.msg || now.Sub(r.last) >= time.Minute {
		r.msg, r.last = msg, now
		return true
	}
	return false
}

func (r *repeatLog) clear() { r.msg = "" }
