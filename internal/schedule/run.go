package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
)

// maxTicksPerVisit bounds the ticks one schedule fires per visit, so a
// schedule catching up on MaxMissed ticks does not hold the others back.
const maxTicksPerVisit = 64

// retryAfter is how soon a step that met a store error is tried again.
const retryAfter = time.Second

// tickTimeout bounds the store calls of one tick (claim, put, confirm).
// They run on a context that shutdown does not cancel (finishing): a put
// cut off between its steps can leave the tick claimed in a way another
// instance must wait out (over Redis, an id claim without its job holds
// the id for 10 s), so a tick in flight is finished, within this bound,
// instead.
const tickTimeout = 5 * time.Second

// finishing is ctx without its cancellation, bounded by tickTimeout.
func finishing(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), tickTimeout)
}

// Run fires schedules until ctx is done: it sleeps until the earliest
// thing to do (a tick's put, a claim to take over) or Refresh, whichever
// is first, or until a change made through this service. A tick in
// progress is finished (tickTimeout); Run returns nil once ctx is done.
func (s *Service) Run(ctx context.Context) error {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-timer.C:
		case <-s.wake:
		}
		next := s.step(ctx)
		wait := s.cfg.Refresh
		if !next.IsZero() {
			wait = min(wait, max(time.Until(next), 0))
		}
		timer.Reset(wait)
	}
}

// step visits every schedule once and returns the earliest time one needs
// a visit again (zero: only the refresh).
func (s *Service) step(ctx context.Context) time.Time {
	all, err := s.st.ListSchedules(ctx)
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("schedules: list failed; retrying", "err", err)
		}
		return time.Now().Add(retryAfter)
	}
	var next time.Time
	for _, sc := range all {
		if ctx.Err() != nil {
			return time.Time{}
		}
		n := s.visit(ctx, sc)
		if !n.IsZero() && (next.IsZero() || n.Before(next)) {
			next = n
		}
	}
	return next
}

// visit fires what is due of sc and returns when it next needs a visit.
func (s *Service) visit(ctx context.Context, sc *store.Schedule) time.Time {
	tm, err := s.timing(sc)
	if err != nil {
		s.log.Error("schedules: stored spec does not parse; schedule idle", "schedule", sc.Name, "spec", sc.Spec, "err", err)
		return time.Time{}
	}
	name := sc.Name
	for range maxTicksPerVisit {
		if sc.Paused || ctx.Err() != nil {
			return time.Time{}
		}
		now := time.Now()
		var again time.Time
		if sc.Pending {
			if now.Before(sc.Lease) {
				return sc.Lease
			}
			sc, again, err = s.fire(ctx, sc, sc.Last, now, true)
		} else {
			base := latest(sc.Last, sc.Since)
			tick := tm.next(base, sc.Anchor)
			switch {
			case tick.IsZero():
				return time.Time{}
			case tick.Sub(now) > s.cfg.Lead:
				return tick.Add(-s.cfg.Lead)
			case now.Sub(tick) > s.cfg.Grace:
				sc, again, err = s.missed(ctx, sc, tm, base, tick, now)
			default:
				sc, again, err = s.fire(ctx, sc, tick, now, false)
			}
		}
		if err != nil {
			if ctx.Err() == nil {
				s.log.Warn("schedules: store call failed; retrying", "schedule", name, "err", err)
			}
			return now.Add(retryAfter)
		}
		if !again.IsZero() {
			return again
		}
		if sc == nil {
			return time.Time{} // deleted meanwhile
		}
	}
	return time.Now() // more to do; let the other schedules have a turn first
}

// missed applies sc's policy to the ticks that passed more than Grace
// ago: tick is the oldest of them.
func (s *Service) missed(ctx context.Context, sc *store.Schedule, tm *timing, base, tick, now time.Time) (*store.Schedule, time.Time, error) {
	newest := tm.newest(base, now.Add(-s.cfg.Grace), sc.Anchor)
	if newest.IsZero() {
		newest = tick
	}
	switch sc.Missed {
	case MissedOne:
		return s.fire(ctx, sc, newest, now, false)
	case MissedAll:
		// Keep the latest MaxMissed: skip to the tick before them.
		cut := newest
		for i := 0; i < MaxMissed && cut.After(base); i++ {
			cut = tm.prev(cut, sc.Anchor)
			if cut.IsZero() {
				break
			}
		}
		if !cut.IsZero() && cut.After(base) {
			s.log.Warn("schedules: more missed ticks than fire; skipping the oldest", "schedule", sc.Name, "max", MaxMissed, "skipped_to", cut)
			return s.skipTo(ctx, sc, cut)
		}
		return s.fire(ctx, sc, tick, now, false)
	default:
		return s.skipTo(ctx, sc, newest)
	}
}

// skipTo records tick as fired without putting anything.
func (s *Service) skipTo(ctx context.Context, sc *store.Schedule, tick time.Time) (*store.Schedule, time.Time, error) {
	ctx, cancel := finishing(ctx)
	defer cancel()
	n := sc.Clone()
	n.Last, n.Pending, n.Lease, n.Rev = tick, false, time.Time{}, store.NewRev()
	got, again, err := s.save(ctx, n, sc.Rev)
	if err == nil && got == n {
		s.met.tick(outcomeSkipped, 1)
	}
	return got, again, err
}

// fire claims tick (or, with takeover, takes over the expired claim of
// sc.Last), puts its job and confirms. It returns the schedule as it now
// stands (reread after a lost race; nil when deleted), or a time to come
// back when the put failed and the claim waits for its lease.
func (s *Service) fire(ctx context.Context, sc *store.Schedule, tick, now time.Time, takeover bool) (*store.Schedule, time.Time, error) {
	ctx, cancel := finishing(ctx)
	defer cancel()
	claim := sc.Clone()
	claim.Last, claim.Pending, claim.Lease, claim.Rev = tick, true, s.leaseEnd(tick, now), store.NewRev()
	got, again, err := s.save(ctx, claim, sc.Rev)
	if err != nil || got != claim {
		return got, again, err // lost the race: got is the winner's record
	}
	if takeover {
		s.log.Info("schedules: taking over an expired claim", "schedule", sc.Name, "tick", tick)
	}
	at, ttr, pri, attempts := tick, sc.TTR, sc.Priority, sc.MaxAttempts
	id := JobID(sc.Name, tick)
	// A schedule's definition holds every field (its defaults were filled
	// when it was set), so its jobs do not take the topic's policy.
	_, err = s.put.Put(ctx, []engine.PutRequest{{
		ID: id, Topic: sc.Topic, Body: sc.Body, At: &at,
		TTR: &ttr, Priority: &pri, MaxAttempts: &attempts,
	}})
	if errors.Is(err, delayq.ErrExists) {
		// "Exists" counts as fired only if the job is there. A put of the
		// same id still in flight on another instance (whose claim this
		// one took over: it was slow, or shutting down) may yet fail, and
		// a store that answered "exists" for it (redisstore did, before it
		// answered "unavailable") would lose the tick. Retry at the
		// lease's end instead: the other put has then stored the job or
		// given up.
		if _, gerr := s.put.Get(ctx, delayq.Ref{ID: id}); gerr != nil {
			err = fmt.Errorf("job %s: id taken by a put not stored yet (%v): %w", id, gerr, err)
		} else {
			err = nil
		}
	}
	if err != nil {
		if ctx.Err() == nil {
			s.log.Warn("schedules: put failed; the claim is retried when its lease ends", "schedule", sc.Name, "tick", tick, "err", err)
			s.met.tick(outcomeFailed, 1)
		}
		return claim, claim.Lease, nil
	}
	if takeover {
		s.met.tick(outcomeTakeover, 1)
	} else {
		s.met.tick(outcomeFired, 1)
	}
	// Confirm; a change of definition meanwhile keeps the claim (Put
	// carries Last and Pending over), so confirm on the new revision.
	cur := claim
	for {
		done := cur.Clone()
		done.Pending, done.Lease, done.Rev = false, time.Time{}, store.NewRev()
		got, again, err := s.save(ctx, done, cur.Rev)
		if err != nil || got == done || got == nil || !got.Pending || !got.Last.Equal(tick) {
			return got, again, err
		}
		cur = got
	}
}

// leaseEnd is when a claim of tick made at now may be taken over: after
// Lease, but never later than a fifth of Lease before the tick. A
// takeover re-puts the tick's job, which is safe only while that job, if
// the first put made it, still waits for its tick (then the re-put is
// "already exists"); once it is due a consumer may have finished it. A
// claim made that close to its tick or after it (a late or missed tick)
// keeps the plain Lease: there is no safe moment left, and the re-put
// after a crash is the documented window.
func (s *Service) leaseEnd(tick, now time.Time) time.Time {
	end := now.Add(s.cfg.Lease)
	if safe := tick.Add(-s.cfg.Lease / 5); safe.After(now) && safe.Before(end) {
		end = safe
	}
	return end
}

// save writes n over rev prev. On a lost race it returns the stored
// record instead (nil if deleted), so the caller continues from it.
func (s *Service) save(ctx context.Context, n *store.Schedule, prev uint64) (*store.Schedule, time.Time, error) {
	err := s.st.SaveSchedule(ctx, n, prev)
	if err == nil {
		return n, time.Time{}, nil
	}
	if !errors.Is(err, store.ErrScheduleConflict) {
		return nil, time.Time{}, err
	}
	cur, err := s.st.GetSchedule(ctx, n.Name)
	if errors.Is(err, store.ErrScheduleNotFound) {
		return nil, time.Time{}, nil
	}
	return cur, time.Time{}, err
}
