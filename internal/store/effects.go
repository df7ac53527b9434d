package store

import (
	"time"

	"github.com/delayq/delayq"
)

// The field effects of the contract (see Store), written once for the
// stores that keep jobs as delayq.Job values (memstore, diskstore);
// redisstore applies the same rules in its Lua scripts.

// Spent reports whether j has used all of its MaxAttempts reserves.
func Spent(j *delayq.Job) bool { return j.MaxAttempts > 0 && j.Attempts >= j.MaxAttempts }

// HeldBy reports whether j is reserved under the reservation ref presents.
func HeldBy(j *delayq.Job, ref delayq.Ref) bool {
	return j.State == delayq.StateReserved && ref.Reservation != "" && j.Reservation == ref.Reservation
}

// Reserve moves j to reserved at start: Attempts+1, a fresh reservation
// token, Deadline = start+TTR.
func Reserve(j *delayq.Job, start time.Time) {
	j.State = delayq.StateReserved
	j.Attempts++
	j.Reservation = delayq.ReservationToken(j.Seq, j.Attempts)
	j.Deadline = start.Add(j.TTR)
}

// ReserveStart is when a reservation made at now of a ready job begins:
// never before the job's Due, so a ready put that raced the reserve's
// clock read still leaves the consumer its full TTR.
func ReserveStart(j *delayq.Job, now time.Time) time.Time {
	if j.Due.After(now) {
		return j.Due
	}
	return now
}

// Unreserve clears the reservation fields of a job leaving reserved.
func Unreserve(j *delayq.Job) {
	j.Reservation = ""
	j.Deadline = time.Time{}
}

// Bury moves j to buried at time at.
func Bury(j *delayq.Job, at time.Time) {
	j.State = delayq.StateBuried
	j.Due = at
	j.Buries++
}

// Kick moves a buried or delayed job to ready at now.
func Kick(j *delayq.Job, now time.Time) {
	j.State = delayq.StateReady
	j.Due = now
	j.Kicks++
}
