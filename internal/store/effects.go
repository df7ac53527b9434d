package store

import (
	"fmt"
	"time"

	"github.com/delayq/delayq"
)

// The guards and field effects of the contract (see Store), written once
// for the stores that keep jobs as delayq.Job values (memstore, diskstore)
// so the two cannot drift; redisstore applies the same rules in its Lua
// scripts. Each Apply function changes j in place: a store that must keep
// the old version (diskstore, to update its indexes) applies it to a
// clone. The times passed in are already in store precision and clamped
// by a Clock.

// Clock is a store's "Now never goes back" clamp (see Store): callers read
// the clock before they wait for the store, so their Nows can arrive out
// of order, and acting at an earlier Now than a previous transition could
// start a reservation before the Tick that readied its job. The zero value
// is ready to use; it is not safe for concurrent use (stores call it under
// their lock).
type Clock struct {
	last time.Time // latest time handed out
}

// At returns the time to act at for a caller's now: t in store precision,
// or the latest time At returned if that is later.
func (c *Clock) At(t time.Time) time.Time {
	t = delayq.TruncMilli(t)
	if t.Before(c.last) {
		return c.last
	}
	c.last = t
	return t
}

// Last is the latest time At returned (zero before the first call).
func (c *Clock) Last() time.Time { return c.last }

// BeginTTR is when a TTR started by a caller at the exact instant exact
// begins, in store precision, for a transition acted at now (what At
// returned for exact): exact rounded up to the millisecond, or now if
// that is later. Rounding up, as due times are, keeps Deadline =
// BeginTTR+TTR from falling up to a millisecond short of exact+TTR, which
// let the job go to a second consumer while the first still held it.
func BeginTTR(now, exact time.Time) time.Time {
	if c := delayq.CeilMilli(exact); c.After(now) {
		return c
	}
	return now
}

// Truncate drops sub-millisecond precision from every time and duration of
// j, the precision stores keep, so a job reads back as it compares.
func Truncate(j *delayq.Job) {
	j.Due = delayq.TruncMilli(j.Due)
	j.Created = delayq.TruncMilli(j.Created)
	j.Deadline = delayq.TruncMilli(j.Deadline)
	j.LastFailed = delayq.TruncMilli(j.LastFailed)
	j.TTR = j.TTR.Truncate(time.Millisecond)
	j.Delay = j.Delay.Truncate(time.Millisecond)
}

// Spent reports whether j has used all of its MaxAttempts reserves, so
// that leaving reserved buries it instead of readying it.
func Spent(j *delayq.Job) bool { return j.MaxAttempts > 0 && j.Attempts >= j.MaxAttempts }

// CheckHeld refuses a consumer call (Release, Touch, Bury, Delete with a
// reservation) unless j is reserved under the reservation ref presents: a
// consumer whose TTR ran out must not act on the next consumer's job.
func CheckHeld(j *delayq.Job, ref delayq.Ref) error {
	if j.State != delayq.StateReserved || ref.Reservation == "" || j.Reservation != ref.Reservation {
		return fmt.Errorf("job %q: %w", j.ID, delayq.ErrNotReserved)
	}
	return nil
}

// CheckDeletable refuses a Delete that p may not make: with Force anything
// goes; with a reservation it must hold j; without one j must not be
// reserved, so an operator cannot pull a job from under its consumer by
// accident.
func CheckDeletable(j *delayq.Job, p DeleteParams) error {
	switch {
	case p.Force:
		return nil
	case p.Ref.Reservation != "":
		return CheckHeld(j, p.Ref)
	case j.State == delayq.StateReserved:
		return fmt.Errorf("job %q: delete a reserved job: %w", j.ID, delayq.ErrNotReserved)
	}
	return nil
}

// CheckKickable refuses KickJob of a job that is neither buried nor
// delayed: only those wait for something a kick can cut short.
func CheckKickable(j *delayq.Job) error {
	if j.State != delayq.StateBuried && j.State != delayq.StateDelayed {
		return fmt.Errorf("job %q: kick a %s job: %w", j.ID, j.State, delayq.ErrState)
	}
	return nil
}

// CheckReservable refuses ReserveJob of a reserved job: it would take the
// job from the consumer holding it.
func CheckReservable(j *delayq.Job) error {
	if j.State == delayq.StateReserved {
		return fmt.Errorf("job %q: already reserved: %w", j.ID, delayq.ErrState)
	}
	return nil
}

// CheckUpdatable refuses Update of a reserved job: its consumer works on
// the job as it was handed out.
func CheckUpdatable(j *delayq.Job) error {
	if j.State == delayq.StateReserved {
		return fmt.Errorf("job %q: update a reserved job: %w", j.ID, delayq.ErrNotReserved)
	}
	return nil
}

// ReserveStart is when a reservation of a ready job whose TTR would
// begin at begin (BeginTTR) begins: never before the job's Due, so a
// ready put that raced the reserve's clock read still leaves the consumer
// its full TTR.
func ReserveStart(j *delayq.Job, begin time.Time) time.Time {
	if j.Due.After(begin) {
		return j.Due
	}
	return begin
}

// ApplyReserve moves j to reserved at start: Attempts+1, a fresh
// reservation token, Deadline = start+TTR; Due unchanged.
func ApplyReserve(j *delayq.Job, start time.Time) {
	j.State = delayq.StateReserved
	j.Attempts++
	j.Reservation = delayq.ReservationToken(j.Seq, j.Attempts)
	j.Deadline = start.Add(j.TTR)
}

// ApplyRelease hands reserved j back at now: Delay = p.Delay, the new
// priority if any; then buried (Due = now, Buries+1) when its attempts are
// spent, else delayed or ready at p.Due (Releases+1). A job's counters
// count its attempts by how each ended (docs/states.md), as its History
// names them, so an attempt counts once: a release that buries the job
// is a bury.
func ApplyRelease(j *delayq.Job, p ReleaseParams, now time.Time) {
	unreserve(j)
	if !Spent(j) {
		j.Releases++
	}
	failed(j, p.Reason, now)
	j.Delay = p.Delay.Truncate(time.Millisecond)
	if p.Priority != nil {
		j.Priority = *p.Priority
	}
	switch due := delayq.TruncMilli(p.Due); {
	case Spent(j):
		bury(j, now)
	case due.After(now):
		j.State, j.Due = delayq.StateDelayed, due
	default:
		j.State, j.Due = delayq.StateReady, due
	}
}

// ApplyTouch gives reserved j a full TTR again from begin (BeginTTR).
func ApplyTouch(j *delayq.Job, begin time.Time) {
	j.Deadline = begin.Add(j.TTR)
}

// ApplyGiveBack undoes the reservation of j that its consumer never
// received: ready again with the attempt the reserve counted taken back,
// and nothing else changed (see Store.GiveBack).
func ApplyGiveBack(j *delayq.Job) {
	unreserve(j)
	j.State = delayq.StateReady
	if j.Attempts > 0 {
		j.Attempts--
	}
}

// ApplyBury moves reserved j to buried at now, with the new priority if
// p has one.
func ApplyBury(j *delayq.Job, p BuryParams, now time.Time) {
	unreserve(j)
	failed(j, p.Reason, now)
	if p.Priority != nil {
		j.Priority = *p.Priority
	}
	bury(j, now)
}

// ApplyKick moves a buried or delayed job to ready at now.
func ApplyKick(j *delayq.Job, now time.Time) {
	j.State = delayq.StateReady
	j.Due = now
	j.Kicks++
}

// ApplyUpdate changes an unreserved j as p asks at now: a non-nil Body or
// Priority replaces the old one, and a Due (with its Delay) makes j ready
// or delayed by that Due, whatever its state was. now is read only when p
// has a Due: an update that sets no time acts at none.
func ApplyUpdate(j *delayq.Job, p UpdateParams, now time.Time) {
	if p.Body != nil {
		j.Body = append([]byte{}, p.Body...)
	}
	if p.Priority != nil {
		j.Priority = *p.Priority
	}
	if p.Due != nil {
		j.Due = delayq.TruncMilli(*p.Due)
		j.Delay = p.Delay.Truncate(time.Millisecond)
		j.State = delayq.StateReady
		if j.Due.After(now) {
			j.State = delayq.StateDelayed
		}
	}
}

// ApplyDue makes a delayed job whose Due has come ready; Due stays, so
// the lateness (now - Due) can be measured.
func ApplyDue(j *delayq.Job) {
	j.State = delayq.StateReady
}

// ApplyTimeout is Tick's effect on reserved j whose TTR ran out:
// Due = LastFailed = the expired Deadline, LastReason =
// delayq.ReasonTTRExpired, and ready (Timeouts+1), or buried (Buries+1,
// not Timeouts: each attempt counts once, by its outcome) when its
// attempts are spent. Acting at the Deadline rather than the
// Tick's now keeps the job's history independent of how late Tick ran.
func ApplyTimeout(j *delayq.Job) {
	deadline := j.Deadline
	unreserve(j)
	failed(j, delayq.ReasonTTRExpired, deadline)
	if Spent(j) {
		bury(j, deadline)
		return
	}
	j.Timeouts++
	j.State, j.Due = delayq.StateReady, deadline
}

// unreserve clears the reservation fields of a job leaving reserved.
func unreserve(j *delayq.Job) {
	j.Reservation = ""
	j.Deadline = time.Time{}
}

// failed records why and when j last failed.
func failed(j *delayq.Job, reason string, at time.Time) {
	j.LastReason, j.LastFailed = reason, at
}

// bury moves j to buried at time at.
func bury(j *delayq.Job, at time.Time) {
	j.State = delayq.StateBuried
	j.Due = at
	j.Buries++
}
