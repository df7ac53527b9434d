package client

import (
	"context"
	"errors"
	"time"

	"github.com/delayq/delayq"
)

// keep watches a running job until done closes: it cancels the handler's
// context (cause ErrTTR) at the soft deadline, and with AutoTouch touches
// the job each time half its TTR has passed so that deadline moves on.
// j.Touch by the handler moves it too (via j.kick).
func (cs *Consumer) keep(ctx context.Context, j *Job, cancel context.CancelCauseFunc, done <-chan struct{}) {
	began := time.Now()
	for {
		now := time.Now()
		soft := time.NewTimer(j.softDeadline().Sub(now))
		var touchC <-chan time.Time
		var touch *time.Timer
		if cs.autoTouch(j, began, now) {
			touch = time.NewTimer(touchIn(j, now))
			touchC = touch.C
		}
		stop := func() {
			soft.Stop()
			if touch != nil {
				touch.Stop()
			}
		}
		select {
		case <-done:
			stop()
			return
		case <-j.kick:
		case <-soft.C:
			cancel(ErrTTR)
			stop()
			return
		case <-touchC:
			if err := cs.autoTouchNow(ctx, j); err != nil {
				cs.cfg.log.Warn("delayq consumer: automatic touch failed", "id", j.ID, "err", err)
				if errors.Is(err, delayq.ErrNotReserved) || errors.Is(err, delayq.ErrNotFound) {
					cancel(ErrLost)
					stop()
					return
				}
			}
		}
		stop()
	}
}

// autoTouch reports whether the keeper should touch j again.
func (cs *Consumer) autoTouch(j *Job, began, now time.Time) bool {
	if !cs.cfg.autoTouch {
		return false
	}
	return cs.cfg.touchLimit <= 0 || now.Sub(began) < cs.cfg.touchLimit
}

// autoTouchNow touches j, giving up before its reservation ends.
func (cs *Consumer) autoTouchNow(ctx context.Context, j *Job) error {
	tctx, cancel := context.WithDeadline(ctx, j.localDeadline())
	defer cancel()
	sent := time.Now()
	if _, err := cs.c.Touch(tctx, j.ID, j.Reservation); err != nil {
		return err
	}
	j.touched(sent)
	return nil
}

// touchIn is how long until j's next automatic touch: when half its TTR has
// passed, or, when that moment is gone (a touch failed), halfway to the
// soft deadline, so failed touches are retried but not in a busy loop.
func touchIn(j *Job, now time.Time) time.Duration {
	if d := j.localDeadline().Sub(now) - j.TTR/2; d > 0 {
		return d
	}
	return max(j.softDeadline().Sub(now)/2, 10*time.Millisecond)
}
