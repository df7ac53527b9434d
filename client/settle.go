package client

import (
	"context"
	"errors"
	"time"

	"github.com/delayq/delayq"
)

// settle reports a handler's result to the server: finish on nil, bury on
// a permanent error, else release with backoff. cause is why the handler's
// context ended, if it did.
func (cs *Consumer) settle(cause error, j *Job, herr error, took time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), cs.c.timeout)
	defer cancel()
	log := cs.cfg.log.With("id", j.ID, "topic", j.Topic, "attempts", j.Attempts)
	if herr == nil {
		err := cs.finish(ctx, j)
		if err != nil {
			log.Warn("delayq consumer: finish failed; the job will run again", "err", err, "took", took)
		}
		if cs.cfg.hooks.Finish != nil {
			cs.cfg.hooks.Finish(j, took, err)
		}
		return
	}
	next, delay, err := cs.fail(ctx, cause, j, herr)
	if err != nil {
		next = "lost"
		log.Warn("delayq consumer: could not hand the failed job back; it returns when its TTR runs out", "err", err, "handler_err", herr)
	} else {
		log.Warn("delayq consumer: handler failed", "err", herr, "next", next, "delay", delay, "took", took)
	}
	if cs.cfg.hooks.Failure != nil {
		cs.cfg.hooks.Failure(j, took, herr, next, delay)
	}
}

// finish finishes j through the consumer's finisher (batched with other
// workers' finishes) when Consume runs one, else on its own.
func (cs *Consumer) finish(ctx context.Context, j *Job) error {
	if f := cs.finisher; f != nil {
		return f.finish(FinishRef{ID: j.ID, Reservation: j.Reservation})
	}
	return cs.c.Finish(ctx, j.ID, j.Reservation)
}

// fail buries or releases a job whose handler failed and says which. The
// handler's error text goes with it as the job's reason, so an operator
// sees why without reading this consumer's log.
func (cs *Consumer) fail(ctx context.Context, cause error, j *Job, herr error) (next string, delay time.Duration, err error) {
	why := WithReason(delayq.TruncateReason(herr.Error()))
	if IsPermanent(herr) {
		_, err = cs.c.Bury(ctx, j.ID, j.Reservation, nil, why)
		return "bury", 0, err
	}
	switch d, ok := retryDelay(herr); {
	case ok:
		delay = d
	case errors.Is(cause, ErrShutdown):
		delay = 0 // not the job's fault: let another consumer take it now
	default:
		delay = cs.cfg.backoff(max(j.Attempts, 1))
	}
	next = "release"
	if j.MaxAttempts > 0 && j.Attempts >= j.MaxAttempts {
		next = "bury" // the server buries a job whose last attempt ends unfinished
	}
	_, err = cs.c.Release(ctx, j.ID, j.Reservation, delay, nil, why)
	if errors.Is(err, delayq.ErrNotFound) && next == "bury" {
		err = nil
	}
	return next, delay, err
}
