package beanstalk

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
)

// handler runs one parsed command. It writes its success reply itself and
// returns an error for reply to map (beanstalkd's dispatch_cmd, one method
// per command).
type handler func(c *conn, cmd *command) error

var handlers [numOps]handler

func init() {
	handlers = [numOps]handler{
		opPut:                (*conn).cmdPut,
		opPeek:               (*conn).cmdPeek,
		opPeekReady:          (*conn).cmdPeekReady,
		opPeekDelayed:        (*conn).cmdPeekDelayed,
		opPeekBuried:         (*conn).cmdPeekBuried,
		opReserve:            (*conn).cmdReserve,
		opReserveWithTimeout: (*conn).cmdReserveWithTimeout,
		opReserveJob:         (*conn).cmdReserveJob,
		opDelete:             (*conn).cmdDelete,
		opRelease:            (*conn).cmdRelease,
		opBury:               (*conn).cmdBury,
		opTouch:              (*conn).cmdTouch,
		opKick:               (*conn).cmdKick,
		opKickJob:            (*conn).cmdKickJob,
		opUse:                (*conn).cmdUse,
		opWatch:              (*conn).cmdWatch,
		opIgnore:             (*conn).cmdIgnore,
		opStats:              (*conn).cmdStats,
		opStatsJob:           (*conn).cmdStatsJob,
		opStatsTube:          (*conn).cmdStatsTube,
		opListTubes:          (*conn).cmdListTubes,
		opListTubeUsed:       (*conn).cmdListTubeUsed,
		opListTubesWatched:   (*conn).cmdListTubesWatched,
		opPauseTube:          (*conn).cmdPauseTube,
		opQuit:               (*conn).cmdQuit,
	}
}

// dispatch parses a line, counts the command as beanstalkd does (only
// once its arguments parsed), and runs it.
func (c *conn) dispatch(line []byte) {
	if !c.guard(line) {
		return
	}
	cmd, err := parseCommand(line)
	if err != nil {
		c.reply(err)
		return
	}
	if !c.authorize(&cmd) {
		return
	}
	c.srv.stats.ops[cmd.op].Add(1)
	if err := handlers[cmd.op](c, &cmd); err != nil {
		c.reply(err)
	}
}

func seconds(n uint32) time.Duration { return time.Duration(n) * time.Second }

func (c *conn) cmdPut(cmd *command) error {
	size := int64(cmd.size)
	if size > int64(c.srv.Engine.Config().MaxBody) {
		if _, err := c.readBody(size+2, false); err != nil {
			c.quit = true
			return nil
		}
		return errJobTooBig
	}
	if cmd.trailing {
		return errBadFormat
	}
	if !c.producer {
		c.producer = true
		c.srv.stats.producers.Add(1)
	}
	body, err := c.readBody(size+2, true)
	if err != nil {
		c.quit = true // the client went away or is too slow to send its body
		return nil
	}
	if string(body[size:]) != "\r\n" {
		return errExpectedCRLF
	}
	delay := seconds(cmd.delay)
	// put always carries a ttr, so a topic policy's ttr applies only to
	// ttr 0, which beanstalkd would raise to 1 s (no client means that):
	// it goes as "not given", with 1 s in place of the usual default. The
	// protocol has no max_attempts, which the engine fills.
	req := engine.PutRequest{Topic: c.use, Body: body[:size:size], Delay: &delay, Priority: &cmd.pri}
	if cmd.ttr == 0 {
		req.DefaultTTR = time.Second
	} else {
		ttr := seconds(cmd.ttr)
		req.TTR = &ttr
	}
	jobs, err := c.srv.Engine.Put(c.ctx, []engine.PutRequest{req})
	if err != nil {
		return err
	}
	c.srv.stats.totalJobs.Add(1)
	c.srv.tubes.update(c.use, func(t *tube) { t.totalJobs++ })
	c.writeUintLine("INSERTED ", jobs[0].Seq)
	return nil
}

func (c *conn) cmdPeek(cmd *command) error {
	j, err := c.liveJob(c.ctx, cmd.id)
	if err != nil {
		return err
	}
	c.writeJob("FOUND", j)
	return nil
}

// liveJob reads job seq as beanstalkd knows jobs: a job that ended and
// is only retained (--retain: finished, deleted, failed) is not found,
// as beanstalkd, which has no such states, would answer.
func (c *conn) liveJob(ctx context.Context, seq uint64) (*delayq.Job, error) {
	ref := delayq.Ref{Seq: seq}
	j, err := c.srv.Engine.Get(ctx, ref)
	if err == nil && j.State.Retained() {
		return nil, delayq.ForJob(ref, fmt.Errorf("beanstalk: job #%d is %s: %w", seq, j.State, delayq.ErrNotFound))
	}
	return j, err
}

func (c *conn) cmdPeekReady(*command) error   { return c.peekFirst(delayq.StateReady) }
func (c *conn) cmdPeekDelayed(*command) error { return c.peekFirst(delayq.StateDelayed) }
func (c *conn) cmdPeekBuried(*command) error  { return c.peekFirst(delayq.StateBuried) }

// peekFirst shows the used tube's next job in state: the store lists each
// state in serving order, so the first is the one beanstalkd shows.
func (c *conn) peekFirst(state delayq.State) error {
	res, err := c.srv.Engine.List(c.ctx, engine.ListRequest{Topic: c.use, State: state, Limit: 1})
	if err != nil {
		return err
	}
	if len(res.Jobs) == 0 {
		return errNotFound
	}
	c.writeJob("FOUND", res.Jobs[0])
	return nil
}

func (c *conn) cmdReserve(*command) error { return c.reserve(-1) }

func (c *conn) cmdReserveWithTimeout(cmd *command) error { return c.reserve(cmd.timeout) }

func (c *conn) cmdReserveJob(cmd *command) error {
	c.setWorker()
	j, err := c.srv.Engine.ReserveJob(c.ctx, delayq.Ref{Seq: cmd.id}, c.by())
	if err != nil {
		return err
	}
	c.sendReserved(j)
	return nil
}

// cmdDelete deletes a job this connection holds with its reservation, or
// any job that is not reserved; a job another connection holds is
// NOT_FOUND, as in beanstalkd.
func (c *conn) cmdDelete(cmd *command) error {
	ref := delayq.Ref{Seq: cmd.id}
	if h, ok := c.held[cmd.id]; ok {
		delete(c.held, cmd.id)
		j, err := c.srv.Engine.Delete(c.ctx, delayq.Ref{Seq: cmd.id, Reservation: h.token}, false)
		if err == nil {
			return c.deleted(j)
		}
		if !errors.Is(err, delayq.ErrNotReserved) {
			return err
		}
		// Our TTR ran out: the job may be ready again, and deletable.
	}
	// Not held by this connection: an operator's delete, audited.
	j, err := c.srv.Engine.Delete(c.ctx, ref, false)
	c.audit("job.delete", jobTarget(cmd.id, j), err, slog.Uint64("seq", cmd.id))
	if err != nil {
		return err
	}
	return c.deleted(j)
}

func (c *conn) deleted(j *delayq.Job) error {
	c.srv.tubes.update(j.Topic, func(t *tube) { t.deletes++ })
	c.srv.unref(c.ctx, j.Topic)
	c.writeLine("DELETED")
	return nil
}

// holding returns the reference of a job this connection holds, or
// errNotFound: release, bury and touch act only on one's own jobs.
func (c *conn) holding(seq uint64) (delayq.Ref, error) {
	h, ok := c.held[seq]
	if !ok {
		return delayq.Ref{}, errNotFound
	}
	return delayq.Ref{Seq: seq, Reservation: h.token}, nil
}

func (c *conn) cmdRelease(cmd *command) error {
	ref, err := c.holding(cmd.id)
	if err != nil {
		return err
	}
	delete(c.held, cmd.id)
	pri := cmd.pri
	j, err := c.srv.Engine.Release(c.ctx, engine.ReleaseRequest{Ref: ref, Delay: seconds(cmd.delay), Priority: &pri})
	if err != nil {
		return err
	}
	if j.State == delayq.StateBuried { // its max_attempts (set over HTTP) are spent
		c.writeLine("BURIED")
		return nil
	}
	c.writeLine("RELEASED")
	return nil
}

func (c *conn) cmdBury(cmd *command) error {
	ref, err := c.holding(cmd.id)
	if err != nil {
		return err
	}
	delete(c.held, cmd.id)
	pri := cmd.pri
	if _, err := c.srv.Engine.Bury(c.ctx, engine.BuryRequest{Ref: ref, Priority: &pri}); err != nil {
		return err
	}
	c.writeLine("BURIED")
	return nil
}

func (c *conn) cmdTouch(cmd *command) error {
	ref, err := c.holding(cmd.id)
	if err != nil {
		return err
	}
	j, err := c.srv.Engine.Touch(c.ctx, ref)
	if err != nil {
		delete(c.held, cmd.id)
		return err
	}
	h := c.held[cmd.id]
	h.deadline = j.Deadline
	c.held[cmd.id] = h
	c.writeLine("TOUCHED")
	return nil
}

func (c *conn) cmdKick(cmd *command) error {
	// beanstalkd's rule, which its clients expect: buried jobs if the
	// tube has any, else delayed ones.
	res, err := c.srv.Engine.Kick(c.ctx, c.use, int(cmd.bound), "")
	c.audit("topic.kick", "topic:"+c.use, err, slog.Int("kicked", res.Kicked), slog.String("state", string(res.State)))
	if err != nil {
		return err
	}
	c.writeLine("KICKED " + strconv.Itoa(res.Kicked))
	return nil
}

func (c *conn) cmdKickJob(cmd *command) error {
	j, err := c.srv.Engine.KickJob(c.ctx, delayq.Ref{Seq: cmd.id})
	c.audit("job.kick", jobTarget(cmd.id, j), err, slog.Uint64("seq", cmd.id))
	if err != nil {
		return err
	}
	c.writeLine("KICKED")
	return nil
}

func (c *conn) cmdUse(cmd *command) error {
	c.srv.tubes.mu.Lock()
	c.srv.tubes.get(c.use).using--
	c.srv.tubes.get(cmd.tube).using++
	c.srv.tubes.mu.Unlock()
	old := c.use
	c.use = cmd.tube
	c.srv.unref(c.ctx, old)
	c.writeLine("USING " + c.use)
	return nil
}

func (c *conn) cmdWatch(cmd *command) error {
	if indexOf(c.watch, cmd.tube) < 0 {
		if len(c.watch) >= c.srv.Engine.Config().MaxReserveTopics {
			// A reserve could not name them all: refuse the watch, as
			// beanstalkd does when it cannot grow the list.
			return errOutOfMemory
		}
		c.watch = append(c.watch, cmd.tube)
		c.srv.tubes.update(cmd.tube, func(t *tube) { t.watching++ })
	}
	c.writeLine("WATCHING " + strconv.Itoa(len(c.watch)))
	return nil
}

// cmdIgnore drops a tube from the watch list, moving the last one into its
// place as beanstalkd's ms_delete does (list-tubes-watched shows it).
func (c *conn) cmdIgnore(cmd *command) error {
	i := indexOf(c.watch, cmd.tube)
	if i >= 0 && len(c.watch) < 2 {
		return errNotIgnored
	}
	if i >= 0 {
		last := len(c.watch) - 1
		c.watch[i] = c.watch[last]
		c.watch = c.watch[:last]
		c.srv.tubes.update(cmd.tube, func(t *tube) { t.watching-- })
		c.srv.unref(c.ctx, cmd.tube)
	}
	c.writeLine("WATCHING " + strconv.Itoa(len(c.watch)))
	return nil
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func (c *conn) cmdListTubeUsed(*command) error {
	c.writeLine("USING " + c.use)
	return nil
}

func (c *conn) cmdListTubesWatched(*command) error {
	c.writeData(yamlList(c.watch))
	return nil
}

func (c *conn) cmdListTubes(*command) error {
	names, err := c.srv.tubeNames(c.ctx)
	if err != nil {
		return err
	}
	c.writeData(yamlList(names))
	return nil
}

func (c *conn) cmdPauseTube(cmd *command) error {
	if cmd.badName {
		return errBadFormat
	}
	if _, ok, err := c.srv.tubeStats(c.ctx, cmd.tube); err != nil || !ok {
		err = orElse(err, errNotFound)
		c.audit("topic.pause", "topic:"+cmd.tube, err)
		return err
	}
	// beanstalkd pauses for at least 1ns so that waiters wake when it
	// ends; the store's millisecond is the nearest delayq can do.
	d := max(seconds(cmd.delay), time.Nanosecond)
	err := c.srv.Engine.Pause(c.ctx, cmd.tube, d)
	c.audit("topic.pause", "topic:"+cmd.tube, err, slog.Duration("for", d))
	if err != nil {
		return err
	}
	c.srv.tubes.update(cmd.tube, func(t *tube) { t.pauses++; t.pause = d })
	c.writeLine("PAUSED")
	return nil
}

// orElse returns err, or def when err is nil.
func orElse(err, def error) error {
	if err != nil {
		return err
	}
	return def
}

func (c *conn) cmdQuit(*command) error {
	c.quit = true
	return nil
}
