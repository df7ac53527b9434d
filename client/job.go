package client

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/delayq/delayq"
)

// Job is a job reserved by a Consumer and handed to its handler.
type Job struct {
	ID          string
	Seq         uint64
	Topic       string
	Body        []byte
	Priority    uint32
	TTR         time.Duration
	MaxAttempts int // 0 = unlimited
	// Attempts counts reserves, this one included: 1 on the first run.
	Attempts int
	// Deadline is when the reservation ends, as the server said at reserve
	// and after each j.Touch. The handler's context ends a safety margin
	// earlier (and follows automatic touches too).
	Deadline time.Time
	// Reservation is the token that proves this consumer holds the job.
	Reservation string
	// History is the job's most recent attempts (at most 20), oldest
	// first, this one last: who reserved each, and how and why the
	// earlier ones ended (released with the handler's error, TTR
	// expired, ...).
	History []delayq.Attempt

	c      *Client
	margin time.Duration
	kick   chan struct{} // tells the keeper the deadline moved; capacity 1

	mu    sync.Mutex
	local time.Time // guarded by mu: the deadline by the local clock
}

// newJob wraps a reserved job; sent is when it was reserved by the local
// clock (see reservedAt), so the local deadline errs early whatever the
// clocks say.
func newJob(c *Client, dj *delayq.Job, sent time.Time, margin time.Duration) *Job {
	return &Job{
		ID: dj.ID, Seq: dj.Seq, Topic: dj.Topic, Body: dj.Body, Priority: dj.Priority,
		TTR: dj.TTR, MaxAttempts: dj.MaxAttempts, Attempts: dj.Attempts,
		Deadline: dj.Deadline, Reservation: dj.Reservation, History: dj.History,
		c: c, margin: margin, kick: make(chan struct{}, 1), local: sent.Add(dj.TTR),
	}
}

// Touch asks the server for more time: the TTR starts again now. Call it
// from a handler that may outlive its TTR, before its context ends. It
// fails with delayq.ErrNotReserved when the job has already been handed
// to someone else.
func (j *Job) Touch(ctx context.Context) error {
	sent := time.Now()
	dj, err := j.c.Touch(ctx, j.ID, j.Reservation)
	if err != nil {
		return fmt.Errorf("client: touch %q: %w", j.ID, err)
	}
	j.touched(sent)
	if dj != nil && !dj.Deadline.IsZero() {
		j.Deadline = dj.Deadline
	} else {
		j.Deadline = sent.Add(j.TTR)
	}
	return nil
}

// touched records a successful touch sent at sent.
func (j *Job) touched(sent time.Time) {
	j.mu.Lock()
	j.local = sent.Add(j.TTR)
	j.mu.Unlock()
	select {
	case j.kick <- struct{}{}:
	default:
	}
}

// localDeadline is when the reservation ends by the local clock.
func (j *Job) localDeadline() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.local
}

// softDeadline is when the handler's context ends.
func (j *Job) softDeadline() time.Time { return j.localDeadline().Add(-j.margin) }

// jobCtx is a handler's context: cancelled by the job's keeper, and
// reporting the current soft deadline, which moves with every touch (a
// plain context's deadline cannot move).
type jobCtx struct {
	context.Context
	j *Job
}

// Deadline reports when the context will be cancelled unless the job is
// touched.
func (c jobCtx) Deadline() (time.Time, bool) { return c.j.softDeadline(), true }

// margin returns how long before the TTR runs out a handler's context
// ends: the configured margin, or a tenth of the TTR between 100 ms and
// 5 s; never more than half the TTR.
func margin(ttr, configured time.Duration) time.Duration {
	m := configured
	if m <= 0 {
		m = min(max(ttr/10, 100*time.Millisecond), 5*time.Second)
	}
	return min(m, ttr/2)
}
