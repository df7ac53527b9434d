package beanstalk

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// reserve waits up to timeout seconds (negative: for ever) for a job of a
// watched tube. In the last second of a reservation this connection holds
// it answers DEADLINE_SOON instead of waiting, as beanstalkd does, and a
// client that hangs up while waiting gets TIMED_OUT; a job ready when the
// command is read is handed out even to a client that already hung up.
func (c *conn) reserve(timeout int64) error {
	c.setWorker()
	if timeout != 0 {
		// Replies of commands pipelined before this one go out before
		// it waits (serve holds them back while commands are buffered).
		_ = c.flush()
	}
	soon, holds := c.soonestDeadline()
	if holds && !time.Now().Before(soon.Add(-deadlineMargin)) {
		return c.reserveNow(errDeadlineSoon)
	}
	// A job ready now is answered now, before the hangup watch below
	// can see the client's end of stream: beanstalkd runs the command it
	// read whatever follows it, so a client that half-closes its socket
	// (shutdown(SHUT_WR)) right after reserve-with-timeout gets RESERVED.
	// Only a wait ends at a hangup (TIMED_OUT, as in beanstalkd).
	jobs, err := c.srv.Engine.Reserve(c.ctx, engine.ReserveRequest{Topics: c.watch, By: c.by()})
	if err != nil {
		return err
	}
	if len(jobs) > 0 {
		c.sendReserved(jobs[0])
		return nil
	}
	if timeout == 0 {
		return errTimedOut
	}
	c.waiting(1)
	defer c.waiting(-1)
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	stop := c.watchHangup(cancel)
	defer stop()
	var until time.Time
	if timeout >= 0 {
		until = time.Now().Add(time.Duration(timeout) * time.Second)
	}
	maxWait := c.srv.Engine.Config().MaxWait
	for {
		wait := maxWait
		if !until.IsZero() {
			wait = min(wait, time.Until(until))
		}
		if holds {
			wait = min(wait, time.Until(soon.Add(-deadlineMargin)))
		}
		jobs, err := c.srv.Engine.Reserve(ctx, engine.ReserveRequest{Topics: c.watch, Wait: max(wait, 0), By: c.by()})
		if err != nil {
			return err
		}
		if len(jobs) > 0 {
			c.sendReserved(jobs[0])
			return nil
		}
		now := time.Now()
		if holds && !now.Before(soon.Add(-deadlineMargin)) {
			return errDeadlineSoon
		}
		if !until.IsZero() && !now.Before(until) {
			return errTimedOut
		}
		if ctx.Err() != nil {
			return errTimedOut
		}
	}
}

// reserveNow takes a ready job without waiting, or returns orElse.
func (c *conn) reserveNow(orElse error) error {
	jobs, err := c.srv.Engine.Reserve(c.ctx, engine.ReserveRequest{Topics: c.watch, By: c.by()})
	if err != nil {
		return err
	}
	if len(jobs) == 0 {
		return orElse
	}
	c.sendReserved(jobs[0])
	return nil
}

// by names this connection's client in the attempts it reserves
// (Job.History): its principal when it authenticated as one, else the
// connection itself, by its remote address. The principal is set before
// the first command (admit), so the name is built once per connection,
// not once per reserve.
func (c *conn) by() string {
	if c.byName == "" {
		if c.principal != nil && c.principal != auth.Open {
			c.byName = c.principal.Name
		} else {
			c.byName = "beanstalk " + c.remote
		}
	}
	return c.byName
}

// sendReserved records the reservation as this connection's and sends it.
func (c *conn) sendReserved(j *delayq.Job) {
	c.held[j.Seq] = held{token: j.Reservation, deadline: j.Deadline}
	c.unsent = append(c.unsent, j.Seq)
	c.writeJob("RESERVED", j)
}

// soonestDeadline returns the earliest deadline of the jobs this
// connection holds. Reservations past their deadline are forgotten: the
// engine's timer hands those jobs out again.
func (c *conn) soonestDeadline() (time.Time, bool) {
	now := time.Now()
	var soon time.Time
	for seq, h := range c.held {
		if !h.deadline.After(now) {
			delete(c.held, seq)
			continue
		}
		if soon.IsZero() || h.deadline.Before(soon) {
			soon = h.deadline
		}
	}
	if soon.IsZero() {
		return soon, false
	}
	// The engine rounds a deadline up to the millisecond (roundUp), so
	// the TTR ends up to that much before it: count the last second from
	// there, as beanstalkd counts it from its exact deadline.
	return soon.Add(-roundUp), true
}

func (c *conn) setWorker() {
	if !c.worker {
		c.worker = true
		c.srv.stats.workers.Add(1)
	}
}

// waiting counts this connection in the current-waiting figures.
func (c *conn) waiting(delta int) {
	c.srv.stats.waiting.Add(int64(delta))
	c.srv.tubes.mu.Lock()
	defer c.srv.tubes.mu.Unlock()
	for _, name := range c.watch {
		c.srv.tubes.get(name).waiting += delta
	}
}
