package diskstore

import (
	"context"
	"errors"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Tick implements store.Store. It takes due work from the near-future heap
// and the reserved-deadline heap in (time, seq) order, loading the next
// chunk of the due index when the near-future heap runs dry, and stages
// every move into one batch.
//
// Tick does not wait for that batch to be durable (the store contract
// allows it): every move it makes follows from the clock alone, so a
// crash before the sync loses nothing a restart's first Tick does not
// make again, and whatever a client can see of a move waits for it: a
// reserve of a promoted job is a later transition in a later (or the
// same) group, and reads wait for the newest group. Not waiting takes
// one fsync out of every firing: a woken consumer's reserve rides the
// group of the promotion instead of the one after it.
func (s *Store) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	limit := p.Max
	if limit <= 0 {
		limit = defaultTickMax
	}
	res := &store.TickResult{Ready: map[string]int{}}
	var now time.Time
	g, err := s.stage(ctx, func(t *txn) error {
		now = s.clock.At(p.Now)
		if err := s.expire(t, now, limit, res); err != nil {
			return err
		}
		for range limit {
			e, err := s.due(now.UnixMilli())
			if e == nil || err != nil {
				return err
			}
			t.take(e)
			if err := s.promote(t, e, now, p.Backoff, res); err != nil {
				if !errors.Is(err, delayq.ErrCorrupt) {
					return err
				}
				s.skipCorrupt(t, e, err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if res.Expired > 0 {
		s.noteExpired(g, res.Expired)
	}
	// Memory shows what is left. Unlike a read, this waits for no group:
	// the next due time is the timer's own business.
	s.mu.Lock()
	err = s.usable()
	var next *time.Time
	if err == nil {
		next, err = s.nextAt()
	}
	if exp, ok := s.nextExpiry(); err == nil && ok && (next == nil || exp.Before(*next)) {
		next = &exp
	}
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if next != nil && !next.After(now) {
		res.Next = now
	} else if next != nil {
		res.Next = *next
	}
	return res, nil
}

// due returns the earliest delayed or reserved entry due at or before
// nowMS, or nil. Requires mu.
func (s *Store) due(nowMS int64) (*entry, error) {
	if s.near.q.Len() == 0 {
		next, ok, err := s.near.nextDue(s)
		if err != nil {
			return nil, err
		}
		if ok && next <= nowMS {
			if err := s.near.load(s); err != nil {
				return nil, err
			}
		}
	}
	e := s.near.q.top()
	if r := s.reserved.top(); r != nil && (e == nil || byAt(r, e)) {
		e = r
	}
	if e == nil || e.at > nowMS {
		return nil, nil
	}
	return e, nil
}

// promote stages one due job: a delayed one becomes ready; a reserved one
// whose TTR ran out becomes ready, or buried if its attempts are spent.
// Requires mu.
func (s *Store) promote(t *txn, e *entry, now time.Time, bs map[string]store.Backoff, res *store.TickResult) error {
	j, err := s.mustRecord(e)
	if err != nil {
		return err
	}
	n := successor(j)
	rec := recWhole
	if j.State == delayq.StateDelayed {
		store.ApplyDue(n)
		rec = recKept // only the state changed: the ready X key says it (overlay.go)
		res.AddLateness(n.Topic, now.Sub(n.Due))
	} else {
		deadline := n.Deadline
		store.ApplyTimeout(n)
		how := delayq.OutcomeTTRExpired
		if n.State == delayq.StateBuried {
			how = delayq.OutcomeBuried
		}
		endAttempt(n, deadline, how, delayq.ReasonTTRExpired)
	}
	switch {
	case j.State == delayq.StateReserved && store.BackOff(n, bs):
		res.AddBackedOff(n.Topic)
	case n.State == delayq.StateBuried:
		res.AddBuried(n.Topic)
	default:
		res.Ready[n.Topic]++
	}
	t.stageAs(j, n, rec)
	return nil
}

// nextAt is the earliest due time or deadline still pending, nil if none.
// Requires mu.
func (s *Store) nextAt() (*time.Time, error) {
	e := s.near.q.top()
	if r := s.reserved.top(); r != nil && (e == nil || byAt(r, e)) {
		e = r
	}
	var ms int64
	found := e != nil
	if found {
		ms = e.at
	}
	if s.near.q.Len() == 0 {
		next, ok, err := s.near.nextDue(s)
		if err != nil {
			return nil, err
		}
		if ok && (!found || next < ms) {
			ms, found = next, true
		}
	}
	if !found {
		return nil, nil
	}
	t := time.UnixMilli(ms)
	return &t, nil
}
