package engine

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/store"
)

// Finish deletes a job its consumer is done with. ref.Reservation must be
// the one reserve handed out (ErrNotReserved otherwise).
func (e *Engine) Finish(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := needReservation("finish", ref); err != nil {
		return nil, e.record("finish", err)
	}
	j, err := e.st.Delete(ctx, store.DeleteParams{Ref: ref, Now: time.Now()})
	if err == nil {
		e.metrics.JobsFinished(j.Topic, 1)
		return asFinished(j), e.record("finish", nil)
	}
	if k := e.finishedBefore(ctx, ref, err); k != nil {
		return k, e.record("finish", nil)
	}
	return j, e.record("finish", delayq.ForJob(ref, err))
}

// asFinished turns the job a finish removed (the store returns it as it
// was, reserved, its attempt ended) into the job as it now is: finished,
// ended when its attempt ended, without reservation.
func asFinished(j *delayq.Job) *delayq.Job {
	j.State = delayq.StateFinished
	j.Ended = delayq.TruncMilli(time.Now())
	if n := len(j.History); n > 0 && !j.History[n-1].Ended.IsZero() {
		j.Ended = j.History[n-1].Ended
	}
	j.Reservation, j.Deadline = "", time.Time{}
	return j
}

// finishedBefore makes a finish idempotent: when the finish of ref failed
// with failure (the job is not found or not reserved) and the job is kept
// (--retain) as finished by this very reservation, it is a finish sent
// again after its answer was lost, and succeeds with the job as it now
// is. Otherwise it returns nil. The reservation's tag must be the
// engine's (a token is "<seq>-<attempt>-<tag>"), and its seq and attempt
// those of the finished job: a consumer whose reservation expired before
// another finished the job still gets not_reserved or not_found.
func (e *Engine) finishedBefore(ctx context.Context, ref delayq.Ref, failure error) *delayq.Job {
	if !errors.Is(failure, delayq.ErrNotFound) && !errors.Is(failure, delayq.ErrNotReserved) {
		return nil
	}
	sl, ok := e.st.(*sealed)
	if !ok {
		return nil
	}
	if _, err := sl.keys.get(ctx); err != nil {
		return nil
	}
	token := sl.keys.open(ref.Reservation)
	if token == "" || token == forgedReservation {
		return nil
	}
	j, err := e.st.Get(ctx, delayq.Ref{ID: ref.ID, Seq: ref.Seq})
	if err != nil || j.State != delayq.StateFinished || delayq.ReservationToken(j.Seq, j.Attempts) != token {
		return nil
	}
	if n := len(j.History); n == 0 || j.History[n-1].Outcome != delayq.OutcomeFinished {
		return nil
	}
	return j
}

// FinishByID finishes a job by its id alone, whoever holds it: the
// original protocol's finish, which has no reservations. A reserved job
// is deleted under the reservation it holds, so it is kept (--retain) as
// finished, as a consumer's finish keeps it; a job not reserved is
// deleted (it was never handed out, so it did not finish).
func (e *Engine) FinishByID(ctx context.Context, id string) (*delayq.Job, error) {
	ref := delayq.Ref{ID: id}
	if err := checkRef(ref); err != nil {
		return nil, e.record("finish", err)
	}
	if j, err := e.st.Get(ctx, ref); err == nil && j.State == delayq.StateReserved {
		ref.Reservation = j.Reservation
	}
	j, err := e.st.Delete(ctx, store.DeleteParams{Ref: ref, Force: true, Now: time.Now()})
	if err == nil && ref.Reservation != "" {
		e.metrics.JobsFinished(j.Topic, 1)
	}
	return j, e.record("finish", delayq.ForJob(delayq.Ref{ID: id}, err))
}

// needReservation refuses a consumer action (finish, release, touch, bury)
// without the reservation reserve handed out: the same rule on every
// front end.
func needReservation(op string, ref delayq.Ref) error {
	if err := checkRef(ref); err != nil {
		return err
	}
	if ref.Reservation == "" {
		return delayq.Invalid(delayq.CodeBadReservation, "reservation", "%s needs the reservation that reserve handed out", op)
	}
	return nil
}

// checkRef refuses a malformed job id. A ref by seq alone (beanstalkd's)
// has nothing to check: an unknown seq is simply not found.
func checkRef(ref delayq.Ref) error {
	if ref.ID == "" {
		return nil
	}
	return delayq.CheckID(ref.ID)
}

// Delete removes a job in any state (an operator's revoke). With force
// false a reserved job can only be deleted with its reservation, as
// beanstalkd's delete behaves.
func (e *Engine) Delete(ctx context.Context, ref delayq.Ref, force bool) (*delayq.Job, error) {
	if err := checkRef(ref); err != nil {
		return nil, e.record("delete", err)
	}
	j, err := e.st.Delete(ctx, store.DeleteParams{Ref: ref, Force: force, Now: time.Now()})
	if err == nil && ref.Reservation != "" {
		// beanstalkd's delete of a job the connection holds is its finish
		e.metrics.JobsFinished(j.Topic, 1)
	}
	return j, e.record("delete", delayq.ForJob(ref, err))
}

// ReleaseRequest hands a reserved job back, ready now or after Delay.
type ReleaseRequest struct {
	Ref      delayq.Ref
	Delay    time.Duration
	Priority *uint32 // nil keeps the priority
	Reason   string  // why the consumer gives it back (the job's LastReason)
}

// Release hands a reserved job back (or buries it when its attempts are
// spent) and returns it in its new state. Without a Delay it takes the
// backoff of the job's topic policy, if any.
func (e *Engine) Release(ctx context.Context, r ReleaseRequest) (*delayq.Job, error) {
	j, err := e.release(ctx, r)
	return j, e.record("release", err)
}

func (e *Engine) release(ctx context.Context, r ReleaseRequest) (*delayq.Job, error) {
	if err := needReservation("release", r.Ref); err != nil {
		return nil, err
	}
	if err := delayq.CheckReason(r.Reason); err != nil {
		return nil, err
	}
	if r.Delay == 0 {
		// A release without a delay takes the topic's backoff, so every
		// protocol's consumers back off alike.
		d, err := e.releaseBackoff(ctx, r.Ref)
		if err != nil {
			return nil, err
		}
		r.Delay = d
	}
	now := time.Now()
	due, delay, err := dueAfter(now, r.Delay)
	if err != nil {
		return nil, err
	}
	j, err := e.st.Release(ctx, store.ReleaseParams{Ref: r.Ref, Priority: r.Priority, Due: due, Delay: delay, Reason: r.Reason, Now: delayq.TruncMilli(now)})
	if err != nil {
		return nil, delayq.ForJob(r.Ref, err)
	}
	e.metrics.Release(j.Topic)
	if j.State == delayq.StateBuried {
		// The job failed: its last allowed attempt ended without a
		// finish. A release that leaves attempts is a retry, not a
		// failed job (docs/states.md).
		e.metrics.JobsFailed(j.Topic, metrics.FailAttemptsExhausted, 1)
	}
	e.announce(j)
	return j, nil
}

// Touch gives a reserved job a fresh TTR from now.
func (e *Engine) Touch(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := needReservation("touch", ref); err != nil {
		return nil, e.record("touch", err)
	}
	// exact: the store rounds the new deadline up from this instant.
	j, err := e.st.Touch(ctx, store.TouchParams{Ref: ref, Now: time.Now()})
	return j, e.record("touch", delayq.ForJob(ref, err))
}

// BuryRequest dead-letters a reserved job.
type BuryRequest struct {
	Ref      delayq.Ref
	Priority *uint32 // nil keeps the priority
	Reason   string  // why the consumer buries it (the job's LastReason)
}

// Bury dead-letters a reserved job until it is kicked.
func (e *Engine) Bury(ctx context.Context, r BuryRequest) (*delayq.Job, error) {
	if err := needReservation("bury", r.Ref); err != nil {
		return nil, e.record("bury", err)
	}
	if err := delayq.CheckReason(r.Reason); err != nil {
		return nil, e.record("bury", err)
	}
	j, err := e.st.Bury(ctx, store.BuryParams{Ref: r.Ref, Priority: r.Priority, Reason: r.Reason, Now: delayq.TruncMilli(time.Now())})
	if err == nil {
		e.metrics.Bury(j.Topic)
		e.metrics.JobsFailed(j.Topic, metrics.FailBuried, 1)
	}
	return j, e.record("bury", delayq.ForJob(r.Ref, err))
}

// MaxKick is the largest n of a topic kick: beanstalkd's kick bound is a
// C unsigned int, and HTTP takes the same rule so both front ends agree.
const MaxKick = math.MaxUint32

// KickResult says what a topic kick did.
type KickResult struct {
	Kicked int
	// State is what the kicked jobs were: StateBuried or StateDelayed.
	State delayq.State
}

// Kick moves up to n jobs of topic to ready (0 ≤ n ≤ MaxKick; 0 kicks
// nothing). state chooses which: StateBuried retries buried jobs only,
// StateDelayed fires delayed jobs early, "" is beanstalkd's rule for its
// kick command (buried ones if the topic has any, else delayed ones).
// Any other state is invalid.
func (e *Engine) Kick(ctx context.Context, topic string, n int, state delayq.State) (KickResult, error) {
	k, err := e.kick(ctx, topic, n, state)
	return k, e.recordN("kick", k.Kicked, err)
}

func (e *Engine) kick(ctx context.Context, topic string, n int, state delayq.State) (KickResult, error) {
	if err := delayq.CheckTopic(topic); err != nil {
		return KickResult{}, err
	}
	if n < 0 || int64(n) > MaxKick {
		return KickResult{}, delayq.Invalid(delayq.CodeBadN, "n", "%d is not between 0 and %d", n, uint64(MaxKick))
	}
	res := KickResult{State: state}
	switch state {
	case delayq.StateBuried, delayq.StateDelayed:
	case "":
		// The store kicks buried jobs when there are any; look first, so
		// the answer can say which kind moved.
		res.State = delayq.StateDelayed
		if t, err := e.Topic(ctx, topic); err != nil {
			return KickResult{}, err
		} else if t.Buried > 0 {
			res.State = delayq.StateBuried
		}
	default:
		return KickResult{}, delayq.Invalid(delayq.CodeBadState, "state", "%q is neither buried (retry failed jobs) nor delayed (fire future jobs early)", state)
	}
	k, err := e.st.Kick(ctx, store.KickParams{Topic: topic, Max: n, State: state, Now: delayq.TruncMilli(time.Now())})
	if err == nil && k > 0 {
		e.waiters.wake(topic, k)
	}
	res.Kicked = k
	return res, err
}

// KickJob moves one buried or delayed job to ready.
func (e *Engine) KickJob(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := checkRef(ref); err != nil {
		return nil, e.record("kick", err)
	}
	j, err := e.st.KickJob(ctx, store.KickJobParams{Ref: ref, Now: delayq.TruncMilli(time.Now())})
	if err == nil {
		e.announce(j)
	}
	err = delayq.ForJobDetail(ref, err, map[error]string{delayq.ErrState: "is neither buried nor delayed"})
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
	if err := checkRef(r.Ref); err != nil {
		return nil, err
	}
	now := time.Now()
	p := store.UpdateParams{Ref: r.Ref, Body: r.Body, Priority: r.Priority, Now: delayq.TruncMilli(now)}
	if err := e.checkBody(r.Body); err != nil {
		return nil, err
	}
	if r.Delay != nil || r.At != nil {
		due, delay, err := dueTime(now, r.Delay, r.At)
		if err != nil {
			return nil, err
		}
		p.Due, p.Delay = &due, delay
	}
	j, err := e.st.Update(ctx, p)
	if err != nil {
		return nil, delayq.ForJobDetail(r.Ref, err, map[error]string{delayq.ErrNotReserved: "is reserved; change it once it is released, buried or finished"})
	}
	e.announce(j)
	return j, nil
}

// Get returns a job.
func (e *Engine) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	j, err := e.st.Get(ctx, ref)
	return j, delayq.ForJob(ref, err)
}

// ListRequest selects a page of a topic's jobs.
type ListRequest struct {
	Topic  string
	State  delayq.State // "" lists every state
	Cursor string       // "" for the first page, then the last page's Next
	Limit  int          // 0 means DefaultListLimit; at most MaxListLimit
}

// Page sizes of List.
const (
	DefaultListLimit = 100
	MaxListLimit     = 1000
)

// ListResult is a page of jobs and the cursor of the next ("" when done).
type ListResult struct {
	Jobs []*delayq.Job
	Next string
}

// List pages through a topic's jobs: each state in serving order (see
// store.Store.List).
func (e *Engine) List(ctx context.Context, r ListRequest) (*ListResult, error) {
	if err := delayq.CheckTopic(r.Topic); err != nil {
		return nil, err
	}
	if r.State != "" && !r.State.Valid() && !r.State.Retained() {
		return nil, delayq.Invalid(delayq.CodeBadState, "state", "%q is not delayed, ready, reserved, buried, finished, deleted or failed", r.State)
	}
	if r.Limit == 0 {
		r.Limit = DefaultListLimit
	}
	if r.Limit < 0 || r.Limit > MaxListLimit {
		return nil, delayq.Invalid(delayq.CodeBadLimit, "limit", "%d is not between 1 and %d", r.Limit, MaxListLimit)
	}
	res, err := e.st.List(ctx, store.ListParams{Topic: r.Topic, State: r.State, Cursor: r.Cursor, Limit: r.Limit})
	if err != nil {
		return nil, err
	}
	return &ListResult{Jobs: res.Jobs, Next: res.Next}, nil
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
	if ts, ok := e.base.(store.TopicStater); ok {
		// One topic's read, not every topic's: beanstalkd reads a tube's
		// stats each time a connection stops using it.
		t, err := ts.TopicStats(ctx, name)
		t.Name = name
		return t, err
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
		return delayq.Invalid(delayq.CodeBadDelay, "delay", "%s is negative", d)
	}
	until := delayq.CeilMilli(time.Now().Add(d))
	if err := e.st.Pause(ctx, store.PauseParams{Topic: topic, Until: until}); err != nil {
		return e.recordAdmin("pause", err)
	}
	time.AfterFunc(time.Until(until), func() { e.waiters.wakeAll(topic) })
	return e.recordAdmin("pause", nil)
}

// FinishBatch finishes up to delayq.MaxBatch reserved jobs in one durable
// write, as a consumer that collected several results would. Every ref
// must carry its reservation. errs[i] is nil when refs[i] was finished,
// or says why that entry alone failed (not found, not reserved by that
// reservation, a missing reservation); err is for the whole call (too
// many refs, store unavailable), in which case nothing was finished.
func (e *Engine) FinishBatch(ctx context.Context, refs []delayq.Ref) (errs []error, err error) {
	if err := checkBatch(len(refs)); err != nil {
		return nil, e.record("finish", err)
	}
	errs = make([]error, len(refs))
	now := time.Now()
	ps := make([]store.DeleteParams, 0, len(refs))
	idx := make([]int, 0, len(refs))
	for i, ref := range refs {
		if err := needReservation("finish", ref); err != nil {
			errs[i] = err
			continue
		}
		if ref.ID == "" && ref.Seq == 0 { // names no job at all
			errs[i] = delayq.CheckID(ref.ID)
			continue
		}
		ps = append(ps, store.DeleteParams{Ref: ref, Now: now})
		idx = append(idx, i)
	}
	if len(ps) > 0 {
		jobs, res, err := e.st.DeleteBatch(ctx, ps)
		if err != nil {
			return nil, e.record("finish", err)
		}
		var done []*delayq.Job
		for k, i := range idx {
			errs[i] = delayq.ForJob(refs[i], res[k])
			if res[k] == nil && k < len(jobs) && jobs[k] != nil {
				done = append(done, jobs[k])
			} else if res[k] != nil && e.finishedBefore(ctx, refs[i], res[k]) != nil {
				errs[i] = nil // finished before: a batch sent again after its answer was lost
			}
		}
		if len(done) > 0 {
			countByTopic(done, e.metrics.JobsFinished)
		}
	}
	for _, err := range errs {
		e.record("finish", err)
	}
	return errs, nil
}
