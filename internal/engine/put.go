package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// MaxTTR is the longest time-to-run: beanstalkd's TTR is a uint32 of
// seconds, and nothing longer is meaningful.
const MaxTTR = math.MaxUint32 * time.Second

// MinAt and MaxAt bound absolute due times: before 1970 is surely a
// mistake (a zero or unset time), and every store holds due times as
// milliseconds since 1970, so "no upper bound" in practice means year
// 9999.
var (
	MinAt = time.Unix(0, 0).UTC()
	MaxAt = time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC)
)

// PutRequest is one job to put, as the producer gave it: a field left
// nil was not given, and the engine fills it in one place (defaults in
// policy.go), so every front end gets the same defaults and topic policy
// for free and only translates its wire. Delay and At are exclusive;
// neither means ready now.
type PutRequest struct {
	ID    string // "" lets the server choose a UUIDv7
	Topic string
	Body  []byte
	Delay *time.Duration // from now
	At    *time.Time     // absolute due time
	// TTR nil: the topic policy's ttr, else DefaultTTR.
	TTR *time.Duration
	// Priority nil: delayq.DefaultPriority.
	Priority *uint32
	// MaxAttempts nil: the topic policy's max_attempts, else 0 (no
	// bound). A protocol without the field leaves it nil always.
	MaxAttempts *int
	// DefaultTTR is the ttr when neither TTR nor the topic's policy
	// gives one; 0 means delayq.DefaultTTR. beanstalkd's put always
	// carries a ttr, and its ttr 0, which beanstalkd raises to 1 s, is
	// put as TTR nil with DefaultTTR 1 s, so a topic policy's ttr
	// applies to it.
	DefaultTTR time.Duration
}

// Put validates and stores jobs in one durable write: all of them or none.
// The jobs come back with their ids and seqs, in request order.
func (e *Engine) Put(ctx context.Context, reqs []PutRequest) ([]*delayq.Job, error) {
	jobs, err := e.put(ctx, reqs)
	if err == nil {
		countByTopic(jobs, e.metrics.JobsPut)
	}
	return jobs, e.recordN("put", len(jobs), err)
}

func (e *Engine) put(ctx context.Context, reqs []PutRequest) ([]*delayq.Job, error) {
	if e.Draining() {
		return nil, delayq.ErrDraining
	}
	if len(reqs) == 0 {
		return nil, delayq.Invalid(delayq.CodeBadBatch, "jobs", "no jobs to put")
	}
	if err := checkBatch(len(reqs)); err != nil {
		return nil, err
	}
	set, err := e.policySet(ctx)
	if err != nil {
		return nil, err
	}
	now := time.Now() // exact: dueAfter rounds the due time up from it
	jobs := make([]*delayq.Job, len(reqs))
	fresh := true // every id generated here, so none can be live
	for i := range reqs {
		j, err := e.newJob(set, &reqs[i], now)
		if err != nil {
			return nil, batchErr(err, i, len(reqs))
		}
		jobs[i] = j
		fresh = fresh && reqs[i].ID == ""
	}
	if err := e.checkTopics(ctx, reqs); err != nil {
		return nil, err
	}
	if adding := capped(set, jobs); adding != nil {
		e.pol.putMu.Lock()
		defer e.pol.putMu.Unlock()
		if err := e.checkFull(ctx, set, adding); err != nil {
			return nil, err
		}
	}
	if err := e.putJobs(ctx, jobs, fresh); err != nil {
		return nil, e.existing(ctx, jobs, err)
	}
	e.announce(jobs...)
	return jobs, nil
}

// putJobs writes new jobs, through the store's PutFresh when every id was
// generated here (the duplicate check is then needless). PutFresh may
// give the jobs ids of the store's own making (redisstore's carry the
// seq): the jobs, as the store left them, are what put answers with and
// announces, so nothing may keep an id newJob made.
func (e *Engine) putJobs(ctx context.Context, jobs []*delayq.Job, fresh bool) error {
	if fp, ok := e.base.(store.FreshPutter); ok && fresh {
		return fp.PutFresh(ctx, jobs)
	}
	return e.st.Put(ctx, jobs)
}

// checkBatch refuses batches over delayq.MaxBatch (put and finish).
func checkBatch(n int) error {
	if n > delayq.MaxBatch {
		return delayq.Invalid(delayq.CodeBatchTooBig, "jobs", "%d jobs in one batch, at most %d", n, delayq.MaxBatch)
	}
	return nil
}

// existing names the job whose id made a put fail with ErrExists, with
// that job's state (live, or retained within the idempotency window), so
// every front end can tell a producer whose retried put was refused
// whether its job waits or is done. The store's *delayq.ExistsError says
// which id, and its state when the store knew it; otherwise (a store
// that does not say) the ids are looked up, only on this failure path.
func (e *Engine) existing(ctx context.Context, jobs []*delayq.Job, err error) error {
	if !errors.Is(err, delayq.ErrExists) {
		return err
	}
	var ee *delayq.ExistsError
	if errors.As(err, &ee) && ee.ID != "" {
		taken := *ee // the store's error stays as it gave it
		if taken.State == "" {
			if j, gerr := e.st.Get(ctx, delayq.Ref{ID: taken.ID}); gerr == nil {
				taken.State = j.State
			}
		}
		return existsErr(&taken, err)
	}
	for _, j := range jobs {
		if live, gerr := e.st.Get(ctx, delayq.Ref{ID: j.ID}); gerr == nil {
			return existsErr(&delayq.ExistsError{ID: j.ID, State: live.State}, err)
		}
	}
	if len(jobs) == 1 {
		return existsErr(&delayq.ExistsError{ID: jobs[0].ID}, err)
	}
	return err
}

// existsErr names the taken id and its state in the error a front end
// shows (`job "x" already exists (finished)`), keeping the store's error
// as the cause and ee where errors.As finds it.
func existsErr(ee *delayq.ExistsError, cause error) error {
	detail := map[error]string{}
	if ee.State != "" {
		detail[delayq.ErrExists] = "already exists (" + string(ee.State) + ")"
	}
	return delayq.ForJobDetail(delayq.Ref{ID: ee.ID}, fmt.Errorf("%w (%w)", ee, cause), detail)
}

// newJob validates r and builds the job it asks for, with what the
// producer left out filled from the topic's policy in set and the
// defaults.
func (e *Engine) newJob(set *policySet, r *PutRequest, now time.Time) (*delayq.Job, error) {
	if err := delayq.CheckTopic(r.Topic); err != nil {
		return nil, err
	}
	id := r.ID
	if id == "" {
		id = uuid.Must(uuid.NewV7()).String()
	} else if err := delayq.CheckID(id); err != nil {
		return nil, err
	}
	if err := e.checkBody(r.Body); err != nil {
		return nil, err
	}
	ttr, pri, attempts := defaults(set, r)
	if err := checkTTR(ttr); err != nil {
		return nil, err
	}
	if attempts < 0 {
		return nil, delayq.Invalid(delayq.CodeBadMaxAttempts, "max_attempts", "%d is negative", attempts)
	}
	due, delay, err := dueTime(now, r.Delay, r.At)
	if err != nil {
		return nil, err
	}
	j := &delayq.Job{
		ID: id, Topic: r.Topic, Body: r.Body, Priority: pri, TTR: ttr,
		MaxAttempts: attempts, State: delayq.StateDelayed, Due: due, Created: delayq.TruncMilli(now), Delay: delay,
	}
	if !due.After(now) {
		j.State = delayq.StateReady
	}
	return j, nil
}

// checkBody refuses bodies over the configured limit.
func (e *Engine) checkBody(b []byte) error {
	if len(b) > e.cfg.MaxBody {
		return delayq.Invalid(delayq.CodeBodyTooBig, "body", "%d bytes, at most %d", len(b), e.cfg.MaxBody)
	}
	return nil
}

// dueTime turns a delay or an absolute time (at most one of them; neither
// means now) into a due time in store precision, rounded up so a job
// never fires early. now is the exact instant of the request: rounding a
// delay up from a truncated now would let the job fire up to a
// millisecond before now+delay.
func dueTime(now time.Time, delay *time.Duration, at *time.Time) (time.Time, time.Duration, error) {
	switch {
	case delay != nil && at != nil:
		return time.Time{}, 0, delayq.Invalid(delayq.CodeBadDelay, "delay", "give delay or at, not both")
	case at != nil:
		if at.Before(MinAt) || at.After(MaxAt) {
			return time.Time{}, 0, delayq.Invalid(delayq.CodeBadAt, "at", "%s is not a usable due time (from 1970-01-01 to 9999-12-31)", at.UTC().Format(time.RFC3339))
		}
		due := delayq.CeilMilli(*at)
		return due, max(due.Sub(delayq.TruncMilli(now)), 0), nil
	case delay == nil:
		return delayq.TruncMilli(now), 0, nil
	}
	return dueAfter(now, *delay)
}

// dueAfter is dueTime for a delay from now.
func dueAfter(now time.Time, delay time.Duration) (time.Time, time.Duration, error) {
	if delay < 0 {
		return time.Time{}, 0, delayq.Invalid(delayq.CodeBadDelay, "delay", "%s is negative", delay)
	}
	if delay == 0 { // ready now, not a fraction of a millisecond from now
		return delayq.TruncMilli(now), 0, nil
	}
	due := delayq.CeilMilli(now.Add(delay))
	if due.Before(now) || due.After(MaxAt) { // overflow, or past what stores hold
		return time.Time{}, 0, delayq.Invalid(delayq.CodeBadDelay, "delay", "%s is too long", delay)
	}
	return due, delay, nil
}

func checkTTR(ttr time.Duration) error {
	if ttr < delayq.MinTTR {
		return delayq.Invalid(delayq.CodeBadTTR, "ttr", "%s is under the minimum of %s", ttr, delayq.MinTTR)
	}
	if ttr > MaxTTR {
		return delayq.Invalid(delayq.CodeBadTTR, "ttr", "%s is over the maximum of %s", ttr, MaxTTR)
	}
	return nil
}

// batchErr names the failing job when a batch has more than one.
func batchErr(err error, i, n int) error {
	ve, ok := err.(*delayq.ValidationError)
	if !ok || n == 1 {
		return err
	}
	c := *ve
	c.Field = "jobs[" + itoa(i) + "]." + c.Field
	return &c
}

// announce wakes waiters for ready jobs and the timer for delayed ones.
func (e *Engine) announce(jobs ...*delayq.Job) {
	var earliest time.Time
	var ready map[string]int // one wake-up per topic: it wakes waiters for all its jobs (waiters.wake)
	for _, j := range jobs {
		switch j.State {
		case delayq.StateReady:
			if ready == nil {
				ready = map[string]int{}
			}
			ready[j.Topic]++
		case delayq.StateDelayed:
			if earliest.IsZero() || j.Due.Before(earliest) {
				earliest = j.Due
			}
		case delayq.StateReserved:
			if earliest.IsZero() || j.Deadline.Before(earliest) {
				earliest = j.Deadline
			}
		}
	}
	for topic, n := range ready {
		e.waiters.wake(topic, n)
	}
	if !earliest.IsZero() {
		e.notifyDue(earliest)
	}
}

// countByTopic calls count once per topic of jobs with its number of jobs.
func countByTopic(jobs []*delayq.Job, count func(topic string, n int)) {
	if len(jobs) == 1 { // the common case, without a map
		count(jobs[0].Topic, 1)
		return
	}
	by := make(map[string]int)
	for _, j := range jobs {
		by[j.Topic]++
	}
	for t, n := range by {
		count(t, n)
	}
}
