package diskstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Put implements store.Store. The id checks are point lookups; the bloom
// filters answer most misses without data blocks, but each still visits
// every L0 table's filter.
func (s *Store) Put(ctx context.Context, jobs []*delayq.Job) error {
	return s.put(ctx, jobs, true)
}

var _ store.FreshPutter = (*Store)(nil)

// PutFresh implements store.FreshPutter: Put without the lookup of each
// id. That lookup is a Pebble point read, and under sustained puts it is
// most of a put's CPU (profiling showed ~85% of a batch put's foreground
// CPU once the store holds a few hundred thousand jobs): each miss, even
// one the bloom filters answer, consults the filter of every L0 table,
// and sustained puts keep L0 deep.
func (s *Store) PutFresh(ctx context.Context, jobs []*delayq.Job) error {
	return s.put(ctx, jobs, false)
}

func (s *Store) put(ctx context.Context, jobs []*delayq.Job, check bool) error {
	return s.write(ctx, "put", func(t *txn) error {
		if err := s.checkPut(); err != nil {
			return err
		}
		if check {
			expired, err := s.checkNew(jobs)
			if err != nil {
				return err
			}
			t.takeOver(expired)
		}
		first := len(t.changes)
		for _, j := range jobs {
			t.seq++
			c := j.Clone()
			c.Seq = t.seq
			store.Truncate(c)
			t.stage(nil, c)
		}
		for i, j := range jobs {
			j.Seq = t.changes[first+i].new.Seq
		}
		return nil
	})
}

// checkNew refuses jobs whose id is live, retained or repeated, with a
// *delayq.ExistsError; it returns the retained jobs whose ids the put
// may take because their retention ran out. Requires mu.
func (s *Store) checkNew(jobs []*delayq.Job) (expired []*delayq.Job, err error) {
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if e := s.byID[j.ID]; e != nil {
			return nil, fmt.Errorf("diskstore: put: %w", &delayq.ExistsError{ID: j.ID, State: stateOf(e.state)})
		}
		if seen[j.ID] {
			return nil, fmt.Errorf("diskstore: put: %w", &delayq.ExistsError{ID: j.ID})
		}
		// Only a record the open group writes needs that group
		// committed first; any other is as Pebble has it.
		get := s.peek
		if s.open.ids[j.ID] {
			get = s.get
		}
		v, found, err := get(jobKey(j.ID))
		if err != nil {
			return nil, unavailable("put", err)
		}
		if found {
			// The taken job's state costs a decode, on a conflict only;
			// a record that does not decode still takes its id.
			old, err := openRecord(v)
			switch {
			case err != nil:
				return nil, fmt.Errorf("diskstore: put: %w", &delayq.ExistsError{ID: j.ID})
			case old.State.Retained() && !s.visible(old):
				expired = append(expired, old)
			default:
				return nil, fmt.Errorf("diskstore: put: %w", &delayq.ExistsError{ID: j.ID, State: old.State})
			}
		}
		seen[j.ID] = true
	}
	return expired, nil
}

// Reserve implements store.Store.
func (s *Store) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	out := []*delayq.Job{}
	err := s.write(ctx, "reserve", func(t *txn) error {
		now := s.clock.At(p.Now)
		begin := store.BeginTTR(now, p.Now)
		topics := s.serving(p.Topics, now)
		for len(out) < p.Max {
			e := pickReady(topics)
			if e == nil {
				break
			}
			t.take(e)
			j, err := s.mustRecord(e)
			if errors.Is(err, delayq.ErrCorrupt) {
				s.skipCorrupt(t, e, err) // else it would be picked first, and fail, forever
				continue
			}
			if err != nil {
				return err
			}
			n := successor(j)
			store.ApplyReserve(n, store.ReserveStart(n, begin))
			startAttempt(n, now, p.By)
			t.stageReserve(j, n)
			out = append(out, n.Clone())
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// serving returns the topics of names that are not paused at now, each
// once. The slice is valid until the next call. Requires mu.
func (s *Store) serving(names []string, now time.Time) []*topic {
	if len(names) <= 8 { // the usual reserve: a few names, no set to build
		out := s.topicBuf[:0]
	next:
		for i, name := range names {
			for _, prev := range names[:i] {
				if prev == name {
					continue next
				}
			}
			if tp := s.topics[name]; tp != nil && !now.Before(tp.paused) {
				out = append(out, tp)
			}
		}
		s.topicBuf = out
		return out
	}
	var out []*topic
	seen := make(map[string]bool, len(names))
	for _, name := range names {
		tp := s.topics[name]
		if seen[name] || tp == nil || now.Before(tp.paused) {
			continue
		}
		seen[name] = true
		out = append(out, tp)
	}
	return out
}

// pickReady returns the first ready job across topics in serving order.
func pickReady(topics []*topic) *entry {
	var best *entry
	for _, tp := range topics {
		if e := tp.byPri.top(); e != nil && (best == nil || byPriority(e, best)) {
			best = e
		}
	}
	return best
}

// mustRecord reads the record of an in-memory entry; its absence means
// memory and disk disagree. Requires mu.
func (s *Store) mustRecord(e *entry) (*delayq.Job, error) {
	if e.job != nil {
		return e.job, nil
	}
	j, ok, err := s.record(e.id)
	if err != nil {
		return nil, err
	}
	if !ok || j.Seq != e.seq {
		return nil, unavailable("read job", fmt.Errorf("%w: job %q #%d indexed but missing", errCorrupt, e.id, e.seq))
	}
	switch e.state {
	case stReserved:
		if j, err = s.overlayed(e, j); err != nil {
			return nil, unavailable("read job", err)
		}
	case stReady:
		promoted(j)
	}
	return j, nil
}

// change runs a transition of one job: fn reads it, returns its new state
// (nil deletes it) and the job to return.
func (s *Store) change(ctx context.Context, op string, fn func() (old, new *delayq.Job, err error)) (*delayq.Job, error) {
	var out *delayq.Job
	err := s.write(ctx, op, func(t *txn) error {
		old, n, err := fn()
		if err != nil {
			return err
		}
		t.stage(old, n)
		if n == nil {
			// No copy of a deleted job, as in DeleteBatch: once the
			// delete is applied nothing in the store refers to the
			// record any more.
			out = old
			return nil
		}
		out = n.Clone()
		return nil
	})
	return out, err
}

// edit is change for a transition that keeps the job ref names: fn checks
// and changes a copy of it in place.
func (s *Store) edit(ctx context.Context, op string, ref delayq.Ref, fn func(n *delayq.Job) error) (*delayq.Job, error) {
	return s.change(ctx, op, func() (*delayq.Job, *delayq.Job, error) {
		j, err := s.lookup(ref)
		if err != nil {
			return nil, nil, err
		}
		n := successor(j)
		if err := fn(n); err != nil {
			return nil, nil, err
		}
		return j, n, nil
	})
}

// ReserveJob implements store.Store (beanstalkd's reserve-job).
func (s *Store) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	return s.edit(ctx, "reserve job", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckReservable(n); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		store.ApplyReserve(n, store.BeginTTR(now, p.Now))
		startAttempt(n, now, p.By)
		return nil
	})
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	return s.edit(ctx, "release", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckHeld(n, p.Ref); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		store.ApplyRelease(n, p, now)
		how := delayq.OutcomeReleased
		if n.State == delayq.StateBuried {
			how = delayq.OutcomeBuried
		}
		endAttempt(n, now, how, p.Reason)
		return nil
	})
}

// Touch implements store.Store.
func (s *Store) Touch(ctx context.Context, p store.TouchParams) (*delayq.Job, error) {
	return s.edit(ctx, "touch", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckHeld(n, p.Ref); err != nil {
			return err
		}
		store.ApplyTouch(n, store.BeginTTR(s.clock.At(p.Now), p.Now))
		return nil
	})
}

// GiveBack implements store.Store. The attempt stays in History, ended
// at its own Reserved: a give-back acts at no time.
func (s *Store) GiveBack(ctx context.Context, p store.GiveBackParams) (*delayq.Job, error) {
	return s.edit(ctx, "give back", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckHeld(n, p.Ref); err != nil {
			return err
		}
		store.ApplyGiveBack(n)
		if k := len(n.History); k > 0 {
			endAttempt(n, n.History[k-1].Reserved, delayq.OutcomeGaveBack, "")
		}
		return nil
	})
}

// Bury implements store.Store.
func (s *Store) Bury(ctx context.Context, p store.BuryParams) (*delayq.Job, error) {
	return s.edit(ctx, "bury", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckHeld(n, p.Ref); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		store.ApplyBury(n, p, now)
		endAttempt(n, now, delayq.OutcomeBuried, p.Reason)
		return nil
	})
}

// KickJob implements store.Store.
func (s *Store) KickJob(ctx context.Context, p store.KickJobParams) (*delayq.Job, error) {
	return s.edit(ctx, "kick job", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckKickable(n); err != nil {
			return err
		}
		store.ApplyKick(n, s.clock.At(p.Now))
		return nil
	})
}

// Delete implements store.Store. It returns the job as the delete
// found it, its attempt ended; with the retention on the job stays as a
// retained job (retain.go).
func (s *Store) Delete(ctx context.Context, p store.DeleteParams) (*delayq.Job, error) {
	var out *delayq.Job
	err := s.write(ctx, "delete", func(t *txn) error {
		j, err := s.deletable(p)
		if err != nil {
			return err
		}
		// No copy, as in DeleteBatch below.
		out = s.remove(t, j, p, s.deleteNow(p))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// deletable returns the job p may delete. Requires mu.
func (s *Store) deletable(p store.DeleteParams) (*delayq.Job, error) {
	j, err := s.lookup(p.Ref)
	if err != nil {
		return nil, err
	}
	if err := store.CheckDeletable(j, p); err != nil {
		return nil, err
	}
	return j, nil
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, p store.UpdateParams) (*delayq.Job, error) {
	return s.edit(ctx, "update", p.Ref, func(n *delayq.Job) error {
		if err := store.CheckUpdatable(n); err != nil {
			return err
		}
		var now time.Time // only a new Due acts at a time
		if p.Due != nil {
			now = s.clock.At(p.Now)
		}
		store.ApplyUpdate(n, p, now)
		return nil
	})
}

// Pause implements store.Store.
func (s *Store) Pause(ctx context.Context, p store.PauseParams) error {
	return s.write(ctx, "pause", func(t *txn) error {
		t.topicCounts(p.Topic).paused = delayq.TruncMilli(p.Until)
		return nil
	})
}

// DeleteBatch implements store.Store: every entry is checked against
// memory and disk as Delete would, and the successes go into one batch,
// one fsync.
func (s *Store) DeleteBatch(ctx context.Context, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	jobs, errs := make([]*delayq.Job, len(ps)), make([]error, len(ps))
	err := s.write(ctx, "delete", func(t *txn) error {
		gone := make(map[uint64]bool, len(ps))
		for i, p := range ps {
			j, err := s.deletable(p)
			if err == nil && gone[j.Seq] {
				err = fmt.Errorf("diskstore: job %s: %w", p.Ref, delayq.ErrNotFound)
			}
			if err != nil {
				if errors.Is(err, delayq.ErrUnavailable) {
					return err
				}
				errs[i] = err
				continue
			}
			gone[j.Seq] = true
			// No copy: what remove returns is a successor the store
			// keeps no reference to (a retained record is another one),
			// and an abort returns no jobs. Its body is the record's,
			// which nothing in the store writes into.
			jobs[i] = s.remove(t, j, p, s.deleteNow(p))
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return jobs, errs, nil
}
