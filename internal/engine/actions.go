package engine

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Finish deletes a job its consumer is done with. ref.Reservation must be
// the one reserve handed out (ErrNotReserved otherwise).
func (e *Engine) Finish(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if ref.Reservation == "" {
		return nil, e.record("finish", delayq.Invalid("bad_reservation", "reservation", "finish needs the reservation that reserve handed out"))
	}
	j, err := e.st.Delete(ctx, store.DeleteParams{Ref: ref})
	return j, e.record("finish", err)
}

// Delete removes a job in any state (an operator's revoke). With force
// false a reserved job can only be deleted with its reservation, as
// beanstalkd's delete behaves.
func (e *Engine) Delete(ctx context.Context, ref delayq.Ref, force bool) (*delayq.Job, error) {
	j, err := e.st.Delete(ctx, store.DeleteParams{Ref: ref, Force: force})
	return j, e.record("delete", err)
}

// ReleaseRequest hands a reserved job back, ready now or after Delay.
type ReleaseRequest struct {
	Ref      delayq.Ref
	Delay    time.Duration
	Priority *uint32 // nil keeps the priority
}

// Release hands a reserved job back (or buries it when its attempts are
// spent) and returns it in its new state.
func (e *Engine) Release(ctx context.Context, r ReleaseRequest) (*delayq.Job, error) {
	j, err := e.release(ctx, r)
	return j, e.record("release", err)
}

func (e *Engine) release(ctx context.Context, r ReleaseRequest) (*delayq.Job, error) {
	now := delayq.TruncMilli(time.Now())
	due, delay, err := dueTime(now, r.Delay, time.Time{})
	if err != nil {
		return nil, err
	}
	j, err := e.st.Release(ctx, store.ReleaseParams{Ref: r.Ref, Priority: r.Priority, Due: due, Delay: delay, Now: now})
	if err != nil {
		return nil, err
	}
	e.announce(j)
	return j, nil
}

// Touch gives a reserved job a fresh TTR from now.
func (e *Engine) Touch(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	j, err := e.st.Touch(ctx, store.TouchParams{Ref: ref, Now: delayq.TruncMilli(time.Now())})
	return j, e.record("touch", err)
}

// Bury dead-letters a reserved job until it is kicked.
func (e *Engine) Bury(ctx context.Context, ref delayq.Ref, priority *uint32) (*delayq.Job, error) {
	j, err := e.st.Bury(ctx, store.BuryParams{Ref: ref, Priority: priority, Now: delayq.TruncMilli(time.Now())})
	return j, e.record("bury", err)
}

// Kick moves up to n jobs of topic to ready: buried ones if it has any,
// else delayed ones. It returns how many moved.
func (e *Engine) Kick(ctx context.Context, topic string, n int) (int, error) {
	k, err := e.kick(ctx, topic, n)
	return k, e.record("kick", err)
}

func (e *Engine) kick(ctx context.Context, topic string, n int) (int, error) {
	if err := delayq.CheckTopic(topic); err != nil {
		return 0, err
	}
	if n < 0 {
		return 0, delayq.Invalid("bad_n", "n", "%d is negative", n)
	}
	k, err := e.st.Kick(ctx, store.KickParams{Topic: topic, Max: n, Now: delayq.TruncMilli(time.Now())})
	if err == nil && k > 0 {
		e.waiters.wake(topic, k)
	}
	return k, err
}

// KickJob moves one buried or delayed job to ready.
func (e *Engine) KickJob(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	j, err := e.st.KickJob(ctx, store.KickJobParams{Ref: ref, Now: delayq.TruncMilli(time.Now())})
	if err == nil {
		e.announce(j)
	}
	return j, e.record("kick", err)
}

// UpdateRequest changes a job that is not reserved. Nil fields are kept;
// Delay and At are exclusive.
type UpdateRequest struct {
	Ref      delayq.Ref
	Delay    *time.Duration
	At       *time.Time
	Body     []byte // nil keeps the body
	Priority *uint32
}

// Update changes a job's due time, body or priority.
func (e *Engine) Update(ctx context.Context, r UpdateRequest) (*delayq.Job, error) {
	j, err := e.update(ctx, r)
	return j, e.record("update", err)
}

func (e *Engine) update(ctx context.Context, r UpdateRequest) (*delayq.Job, error) {
	now := delayq.TruncMilli(time.Now())
	p := store.UpdateParams{Ref: r.Ref, Body: r.Body, Priority: r.Priority, Now: now}
	if r.Delay != nil && r.At != nil {
		return nil, delayq.Invalid("bad_delay", "delay", "give delay or at, not both")
	}
	if r.Body != nil && len(r.Body) > e.cfg.MaxBody {
		return nil, delayq.Invalid("body_too_big", "body", "%d bytes, at most %d", len(r.Body), e.cfg.MaxBody)
	}
	if r.Delay != nil || r.At != nil {
		var d time.Duration
		var at time.Time
		if r.Delay != nil {
			d = *r.Delay
		} else {
			at = *r.At
		}
		due, delay, err := dueTime(now, d, at)
		if err != nil {
			return nil, err
		}
		p.Due, p.Delay = &due, delay
	}
	j, err := e.st.Update(ctx, p)
	if err != nil {
		return nil, err
	}
	e.announce(j)
	return j, nil
}

// Get returns a job.
func (e *Engine) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	return e.st.Get(ctx, ref)
}

// List pages through a topic's jobs (see store.Store.List for the order).
func (e *Engine) List(ctx context.Context, p store.ListParams) (*store.ListResult, error) {
	if err := delayq.CheckTopic(p.Topic); err != nil {
		return nil, err
	}
	if p.State != "" && !p.State.Valid() {
		return nil, delayq.Invalid("bad_state", "state", "%q is not delayed, ready, reserved or buried", p.State)
	}
	if p.Limit <= 0 || p.Limit > 1000 {
		return nil, delayq.Invalid("bad_limit", "limit", "%d is not between 1 and 1000", p.Limit)
	}
	return e.st.List(ctx, p)
}

// Topics returns every topic's stats, sorted by name.
func (e *Engine) Topics(ctx context.Context) ([]delayq.TopicStats, error) {
	return e.st.Topics(ctx)
}

// Topic returns one topic's stats; a topic with no jobs has zero counts.
func (e *Engine) Topic(ctx context.Context, name string) (delayq.TopicStats, error) {
	if err := delayq.CheckTopic(name); err != nil {
		return delayq.TopicStats{}, err
	}
	all, err := e.st.Topics(ctx)
	if err != nil {
		return delayq.TopicStats{}, err
	}
	for _, t := range all {
		if t.Name == name {
			return t, nil
		}
	}
	return delayq.TopicStats{Name: name}, nil
}

// Waiting returns how many reserves are long-polling on topic.
func (e *Engine) Waiting(topic string) int { return e.waiters.count(topic) }

// Pause stops reserves from topic for d (beanstalkd pause-tube). When the
// pause ends, waiters of the topic are woken.
func (e *Engine) Pause(ctx context.Context, topic string, d time.Duration) error {
	if err := delayq.CheckTopic(topic); err != nil {
		return err
	}
	if d < 0 {
		return delayq.Invalid("bad_delay", "delay", "%s is negative", d)
	}
	until := delayq.CeilMilli(time.Now().Add(d))
	if err := e.st.Pause(ctx, store.PauseParams{Topic: topic, Until: until}); err != nil {
		return e.record("pause", err)
	}
	time.AfterFunc(time.Until(until), func() { e.waiters.wake(topic, e.waiters.count(topic)) })
	return e.record("pause", nil)
}

// FinishBatch finishes up to delayq.MaxBatch reserved jobs in one durable
// write, as a consumer that collected several results would. Every ref
// must carry its reservation. errs[i] is nil when refs[i] was finished,
// or says why that entry alone failed (not found, not reserved by that
// reservation, a missing reservation); err is for the whole call (too
// many refs, store unavailable), in which case nothing was finished.
func (e *Engine) FinishBatch(ctx context.Context, refs []delayq.Ref) (errs []error, err error) {
	if len(refs) > delayq.MaxBatch {
		return nil, e.record("finish", delayq.Invalid("batch_too_big", "jobs", "%d jobs in one batch, at most %d", len(refs), delayq.MaxBatch))
	}
	errs = make([]error, len(refs))
	ps := make([]store.DeleteParams, 0, len(refs))
	idx := make([]int, 0, len(refs))
	for i, ref := range refs {
		if ref.Reservation == "" {
			errs[i] = delayq.Invalid("bad_reservation", "reservation", "finish needs the reservation that reserve handed out")
			continue
		}
		ps = append(ps, store.DeleteParams{Ref: ref})
		idx = append(idx, i)
	}
	if len(ps) > 0 {
		_, res, err := e.st.DeleteBatch(ctx, ps)
		if err != nil {
			return nil, e.record("finish", err)
		}
		for k, i := range idx {
			errs[i] = res[k]
		}
	}
	for _, err := range errs {
		e.record("finish", err)
	}
	return errs, nil
}
