// Package store defines the contract between the engine and a backend.
// It holds no state. Every backend (memstore, diskstore, redisstore,
// pgstore and any later one) must pass the conformance suite in package storetest:
// storetest.Run for every store, and storetest.RunShared, two and three
// instances over one shared store, for every store several instances can
// share.
//
// # What every store implements
//
//   - Store: jobs and their transitions, each one atomic and, for the
//     durable backends, durable before it returns (the contract is on
//     the interface below).
//   - DocStore (embedded in Store; doc.go): small named documents
//     (schedules, policies, alarms, the reservation key), every write a
//     compare-and-set on a revision, durable before it returns.
//   - DueCounter (embedded; due.go): a topic's delayed jobs counted by due
//     time from the due-time index, for the dashboard.
//   - SeriesStore (embedded; series.go): the dashboard's chart series,
//     durable, shared by the instances of a shared store.
//
// # What a store may implement, and what each promises
//
//   - Notifier: the store is shared by several instances. Notify's events
//     say what another instance changed: Event.Topic gained Event.Count
//     ready jobs (the engine wakes that topic's long-poll waiters), or
//     Event.Due is an earlier due time or deadline than the receiver may
//     know of (the engine's timer steps at once). Events are hints, not
//     transitions: one lost costs latency, never a job, and a store that
//     reconnects after losing some sends a Due of now so the timer looks
//     again. An instance need not be told of its own changes.
//   - WaitMarker: a Notifier whose ready-count events cost the store
//     something to send (redisstore) sends them only to instances that
//     said they have long-poll waiters on the topic. The engine marks a
//     topic before the store attempt that follows parking a waiter, and
//     renews the mark while it still has waiters there; a transition of
//     another instance that makes jobs of a marked topic ready after the
//     mark was written sends its Event.Topic, one before it was made
//     ready before the waiter's attempt, which finds the jobs. A mark
//     that lapses costs latency, never a job (the waiter's long poll
//     ends and its consumer comes back).
//   - Cluster: instances of a shared store advertise themselves and list
//     the live ones (GET /v1/cluster); a store that is not one is a
//     deployment of one instance.
//   - FreshPutter: a put of ids the engine generated itself may skip the
//     costly duplicate-id check, and may give the jobs ids of its own.
//   - TopicStater: one topic's stats without reading every topic's.
//   - Backuper: a consistent copy while serving (diskstore). A store
//     without it refuses backups; its deployment backs up its server
//     (Redis, Postgres) instead.
//   - Healther: the store can be degraded while it still serves (low
//     disk, known damage); /healthz reports it.
//   - CommitObserver: the store times its durable writes for the metrics.
//
// # Who runs the timer when several instances share a store
//
// Every instance runs the engine's timer loop and calls Tick; Tick is
// where due work moves (delayed to ready, expired reservations back to
// ready or buried, expired retained jobs removed). A shared store divides
// that work among the live instances itself (redisstore: timer buckets
// leased by the live instances, leases.go; pgstore: one lease, a session
// advisory lock, tick.go), so that:
//
//   - each due job is moved exactly once, whichever instances tick
//     concurrently (every move is one atomic step that moves only what is
//     still due; the division only spreads the work, correctness never
//     depends on it);
//   - the work an instance held moves to the live ones within a bound
//     when it dies without a word (kill -9), and at once when it closes;
//   - an instance whose Tick moved nothing sleeps until the Next it was
//     told, or until an Event says an earlier time.
//
// A store the instances do not share (memstore, diskstore) is ticked by
// its one instance.
package store

import (
	"context"
	"io"
	"time"

	"github.com/delayq/delayq"
)

// Store keeps jobs and makes every state transition atomic and, for the
// durable backends, durable before the method returns.
//
// Contract shared by all methods:
//
//   - Every method is one atomic transition: it happens whole or not at all.
//     On error nothing changed (except for ErrUnavailable after a partial
//     I/O failure, after which the store refuses further calls).
//   - Errors wrap the delayq sentinels: ErrNotFound (no live job with that
//     ref), ErrExists, ErrNotReserved, ErrState, ErrUnavailable. Storage
//     library errors never escape unwrapped into a sentinel's place.
//   - Time is an argument (Now); a store never reads the clock to decide a
//     transition. Times are kept with millisecond precision: a Now is
//     truncated to act at and compare with, and a Deadline computed from
//     it is rounded up (BeginTTR), so a consumer is never given less than
//     its TTR from the exact instant the caller passed. The caller may
//     pass its exact clock read; due times come rounded up already.
//   - Now never goes back. Concurrent callers read the clock before they
//     wait for the store, so their Nows can arrive out of order; a store
//     acts at the later of p.Now and the latest Now it has acted at. So a
//     reservation never starts before the Due or expired Deadline that
//     made its job ready, and its Deadline is a full TTR after that.
//   - Deadlines: Reserve, ReserveJob and Touch set Deadline =
//     ceil_ms(max(p.Now, the time acted at, and for Reserve the Due) +
//     TTR); TTR is whole milliseconds, so with BeginTTR that is
//     max(BeginTTR(acted at, p.Now), Due) + TTR.
//   - Jobs returned are copies the caller may keep and modify.
//   - Methods are safe for concurrent use.
//   - A Ref names a job by ID, or by Seq when ID is empty.
//
// Ordering: ready jobs are served by Priority (lower first), then Seq,
// across all topics of a Reserve. Delayed jobs become ready in Due order.
//
// Field effects, pinned by storetest so every backend returns the same jobs
// (fields not named are unchanged; leaving reserved always clears
// Reservation and Deadline):
//
//   - Durations (TTR, Delay) are kept with millisecond precision too, and
//     every comparison with Now uses the truncated values.
//   - Reserve, ReserveJob: Attempts+1; Due unchanged.
//   - Release: Delay = p.Delay, LastReason = p.Reason, LastFailed =
//     p.Now; when it goes ready or delayed, Releases+1 and Due = p.Due;
//     when buried instead (attempts spent), Buries+1 (not Releases: each
//     attempt counts once, by how it ended, docs/states.md) and Due = p.Now.
//   - Bury: Buries+1, Due = p.Now, LastReason = p.Reason, LastFailed = p.Now.
//   - GiveBack: ready, Attempts-1; nothing else (no Releases, Buries,
//     LastReason or LastFailed change; Due and Priority unchanged).
//   - Kick, KickJob: Kicks+1, Due = p.Now.
//   - Update with a Due: Due = *p.Due, Delay = p.Delay. A non-nil empty Body
//     replaces the body.
//   - Tick, delayed → ready: Due unchanged (lateness = p.Now - Due).
//   - Tick, TTR ran out: Due = LastFailed = the expired Deadline and
//     LastReason = delayq.ReasonTTRExpired, whether the job goes ready
//     (Timeouts+1) or, attempts spent, buried (Buries+1, not Timeouts);
//     with a backoff
//     for its topic in p.Backoff, a job that would go ready goes delayed
//     instead, Due = the expired Deadline + BackoffDelay.
//   - Reserve skips a topic while p.Now < PausedUntil. A pause stays (and
//     keeps its topic listed by Topics) until Pause with a zero Until;
//     stores never drop it by themselves.
//   - History (delayq.Job.History, at most delayq.MaxHistory attempts,
//     oldest first): Reserve and ReserveJob start an attempt
//     (Job.StartAttempt at the time acted at, By = p.By) after Attempts+1;
//     the attempt in progress ends (Job.EndAttempt, at the time acted at)
//     with OutcomeReleased and p.Reason on Release (OutcomeBuried when
//     the release buries it), OutcomeBuried and p.Reason on Bury,
//     OutcomeGaveBack on GiveBack (the attempt stays in History though
//     Attempts goes back; a give-back acts at no time, so it ends at the
//     attempt's own Reserved), OutcomeTTRExpired and ReasonTTRExpired on
//     a Tick whose TTR ran out (OutcomeBuried when its attempts are
//     spent; ended at the expired Deadline, as LastFailed), OutcomeFinished
//     on a Delete with its Reservation, OutcomeDeleted on a forced Delete
//     of a reserved job. GiveBack's "nothing else" above is apart from
//     History.
//   - Retention (Retention, given to each store when it opens): with
//     Retention.For > 0, Delete and DeleteBatch keep the job they remove
//     as a retained job: its State becomes delayq.EndedState(the live
//     state, whether it was a Delete with its matching Reservation), Ended
//     = p.Now, Reservation and Deadline cleared, Body nil unless
//     Retention.Bodies; every other field as the delete found it, History
//     included (its attempt ended as above). A retained job is kept until
//     Ended + Retention.For: Get (by ID or Seq) returns it while
//     Retention.Now() is before that; List with a retained State pages
//     through that state's retained jobs of the topic by Ended then Seq;
//     Put of its ID fails with a *delayq.ExistsError whose State is the
//     retained state (as a live ID's does, with the live State); every
//     other call treats it as absent (ErrNotFound: no live job), and
//     Topics does not count it. Expired retained jobs are removed by
//     Tick (at most p.Max per call, found through an index ordered by
//     expiry, so the cost follows what expires, not what is kept) or by
//     the backend's own expiry (Redis key TTLs); until removed they are
//     invisible. A job deleted while Retention.For is 0 is gone at once,
//     as before.
//   - List of an unknown topic: an empty page, nil error. A Ref with
//     neither ID nor Seq, or a Seq never assigned: ErrNotFound. Get,
//     Update and KickJob ignore Ref.Reservation; Put writes back only Seq.
//   - Consumer calls (Release, GiveBack, Touch, Bury, Delete with a
//     Reservation) on a
//     job that is not reserved, or with an empty or other Reservation:
//     ErrNotReserved; ErrNotFound only when no live job matches the ref.
type Store interface {
	// Put stores new jobs in one durable write. The caller fills every
	// field but Seq, which Put assigns (increasing, never reused) and writes
	// back into the jobs. State is StateReady or StateDelayed, as the
	// caller decided from Due. If any job's ID is live or retained (or
	// repeated within jobs), Put stores none and returns a
	// *delayq.ExistsError naming the id (with the taken job's State when
	// the store knows it without another read: always for a retained
	// one).
	Put(ctx context.Context, jobs []*delayq.Job) error

	// Reserve moves up to p.Max ready jobs of p.Topics (skipping topics
	// paused at p.Now) to reserved, in priority-then-seq order, increments
	// Attempts, sets Reservation to delayq.ReservationToken(seq, attempts)
	// and Deadline to ceil_ms(max(p.Now, Due)+TTR) (a ready job put by a
	// caller whose clock read came later still gets a full TTR, and a
	// reserve mid-millisecond gets its TTR from that instant, not from the
	// millisecond before it). Nothing ready: an empty slice, nil error.
	Reserve(ctx context.Context, p ReserveParams) ([]*delayq.Job, error)

	// ReserveJob moves the job p.Ref names from ready, delayed or buried
	// to reserved, whatever its topic's pause (beanstalkd's reserve-job),
	// with the field effects of Reserve (Attempts+1, Reservation, Deadline
	// = ceil_ms(p.Now+TTR); Due unchanged). A reserved job: ErrState.
	ReserveJob(ctx context.Context, p ReserveJobParams) (*delayq.Job, error)

	// Release hands a reserved job back: ready when p.Due <= p.Now,
	// delayed otherwise, or buried when MaxAttempts > 0 and Attempts >=
	// MaxAttempts. p.Ref.Reservation must match (ErrNotReserved otherwise).
	Release(ctx context.Context, p ReleaseParams) (*delayq.Job, error)

	// GiveBack undoes a reservation its consumer never received: the
	// front end's client went away before the job reached it (an HTTP
	// reserve whose request ended, a beanstalkd connection that closed
	// before its RESERVED reply went out). The job goes back to ready as
	// if the reserve had not happened: Attempts-1, Reservation and
	// Deadline cleared, and nothing else changes, so it costs no attempt
	// and is never buried for attempts spent, unlike Release, which is a
	// consumer's own failure and counts as one. The job keeps its place
	// in the serving order (Priority, Seq and Due unchanged). A job
	// reserved by ReserveJob out of delayed or buried goes back to ready
	// too, as beanstalkd readies every job of a closed connection.
	// p.Ref.Reservation must match (ErrNotReserved otherwise: the TTR ran
	// out meanwhile and the job has moved on).
	GiveBack(ctx context.Context, p GiveBackParams) (*delayq.Job, error)

	// Touch sets a reserved job's deadline to ceil_ms(p.Now+TTR). The
	// reservation must match.
	Touch(ctx context.Context, p TouchParams) (*delayq.Job, error)

	// Bury moves a reserved job to buried (Due = p.Now). The reservation
	// must match.
	Bury(ctx context.Context, p BuryParams) (*delayq.Job, error)

	// Kick moves up to p.Max jobs of p.Topic to ready and returns how
	// many moved. p.State chooses which: StateBuried only buried ones
	// (oldest buried first), StateDelayed only delayed ones (earliest due
	// first), "" beanstalkd's rule: buried ones if the topic has any, else
	// delayed ones. Any other state kicks nothing.
	Kick(ctx context.Context, p KickParams) (int, error)

	// KickJob moves one buried or delayed job to ready. Any other state:
	// ErrState.
	KickJob(ctx context.Context, p KickJobParams) (*delayq.Job, error)

	// Delete removes a job and returns it as it was. With p.Force it
	// removes the job in any state. Otherwise, with a Reservation the job
	// must be reserved under it, and without one it must not be reserved
	// at all; either failure is ErrNotReserved.
	Delete(ctx context.Context, p DeleteParams) (*delayq.Job, error)

	// DeleteBatch runs the deletes of ps (at most delayq.MaxBatch) as one
	// transition of independent entries: each entry succeeds or fails on
	// its own, exactly as Delete would have, seen in order (so a ref
	// repeated in ps is ErrNotFound the second time), and the successes
	// are durable together before it returns. jobs[i] is the deleted job
	// when errs[i] is nil. err is for the whole call (unavailable,
	// canceled); then nothing was deleted. A store that cannot make the
	// batch one write (redisstore: the jobs may live in different hash
	// slots) runs the entries one by one and fails an entry that meets an
	// outage alone, with ErrUnavailable.
	DeleteBatch(ctx context.Context, ps []DeleteParams) (jobs []*delayq.Job, errs []error, err error)

	// Update changes a job that is not reserved (ErrNotReserved if it is).
	// Nil fields are kept. A new Due makes the job ready (Due <= Now) or
	// delayed, whatever its state was, buried included.
	Update(ctx context.Context, p UpdateParams) (*delayq.Job, error)

	// Get returns the job: a live one, or a retained one within the
	// retention.
	Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error)

	// List pages through a topic's jobs. With a retained State it lists
	// the topic's retained jobs in that state by Ended then Seq. With a
	// live State it lists that state in its serving order: ready by priority then seq, delayed by due then
	// seq, reserved by deadline then seq, buried by due (the time it was
	// buried) then seq. Without one it lists ready, delayed, reserved, then
	// buried jobs, each in that order. Cursor is opaque: "" starts, and the
	// result's Next continues ("" when there is no more).
	List(ctx context.Context, p ListParams) (*ListResult, error)

	// Topics returns the stats of every topic that has live jobs or is
	// paused, sorted by name.
	Topics(ctx context.Context) ([]delayq.TopicStats, error)

	// Pause stops reserves from p.Topic until p.Until (beanstalkd
	// pause-tube); a zero Until unpauses.
	Pause(ctx context.Context, p PauseParams) error

	// Tick makes due work ready, at most p.Max jobs per call: delayed jobs
	// with Due <= p.Now, and reserved jobs whose Deadline <= p.Now (ready at
	// once with Timeouts+1, or buried when their attempts are spent). It
	// reports the topics that gained ready jobs, each promoted delayed job's
	// lateness, and the earliest due time or deadline still pending (p.Now
	// when more than Max were due; zero when nothing is pending).
	//
	// Tick alone may return before its moves are durable: each follows
	// from the clock, so a restart's Tick makes any lost one again. Its
	// moves must still be ordered before every later transition, and
	// reads must not show them before they are durable.
	Tick(ctx context.Context, p TickParams) (*TickResult, error)

	// Close releases the store's resources. Calls after Close fail.
	Close() error

	// DocStore: every store keeps the small named documents (schedules,
	// topic policies, alarms, the reservation key) beside its jobs.
	DocStore

	// DueCounter: every store counts a topic's delayed jobs by due time
	// from its due-time index, for the dashboard.
	DueCounter

	// SeriesStore: every store keeps the dashboard's chart series
	// (series.go), so they survive restarts and are shared by instances.
	SeriesStore
}

// ReserveParams are the arguments of Store.Reserve.
type ReserveParams struct {
	Topics []string
	Max    int
	Now    time.Time
	By     string // who reserves, kept in the attempt's By
}

// Retention is how long a store keeps the jobs it removes (see the
// contract on Store). The zero value keeps none.
type Retention struct {
	// For is how long a removed job stays readable, and its id taken,
	// after it ended; 0 keeps none.
	For time.Duration
	// Bodies keeps the retained jobs' bodies; without it a retained job
	// has a nil Body.
	Bodies bool
	// Now is the clock read at reads (Get, List, Put's id check) to hide
	// retained jobs that expired but are not removed yet. Nil means
	// time.Now; the conformance suite passes its own.
	Now func() time.Time
}

// Clock returns r.Now, or time.Now when it is nil.
func (r Retention) Clock() func() time.Time {
	if r.Now == nil {
		return time.Now
	}
	return r.Now
}

// ReleaseParams are the arguments of Store.Release.
type ReleaseParams struct {
	Ref      delayq.Ref
	Priority *uint32 // nil keeps the job's priority
	Due      time.Time
	Delay    time.Duration // recorded as the job's Delay
	Reason   string        // why the consumer gave the job back, kept as LastReason
	Now      time.Time
}

// GiveBackParams are the arguments of Store.GiveBack. A give-back acts
// at no time: it restores the job as the reserve found it.
type GiveBackParams struct {
	Ref delayq.Ref // with the Reservation the undelivered reserve made
}

// TouchParams are the arguments of Store.Touch.
type TouchParams struct {
	Ref delayq.Ref
	Now time.Time
}

// BuryParams are the arguments of Store.Bury.
type BuryParams struct {
	Ref      delayq.Ref
	Priority *uint32 // nil keeps the job's priority
	Reason   string  // why the consumer buried the job, kept as LastReason
	Now      time.Time
}

// KickParams are the arguments of Store.Kick.
type KickParams struct {
	Topic string
	Max   int
	// State is the state kicked: delayq.StateBuried, delayq.StateDelayed,
	// or "" for beanstalkd's rule (buried if any, else delayed).
	State delayq.State
	Now   time.Time
}

// KickJobParams are the arguments of Store.KickJob.
type KickJobParams struct {
	Ref delayq.Ref
	Now time.Time
}

// DeleteParams are the arguments of Store.Delete.
type DeleteParams struct {
	Ref   delayq.Ref
	Force bool      // delete whatever the state and reservation (operator delete)
	Now   time.Time // when it ended: a retained job's Ended
}

// UpdateParams are the arguments of Store.Update.
type UpdateParams struct {
	Ref      delayq.Ref
	Due      *time.Time
	Delay    time.Duration // recorded as the job's Delay when Due is set
	Body     []byte        // nil keeps the body
	Priority *uint32
	Now      time.Time
}

// ListParams are the arguments of Store.List.
type ListParams struct {
	Topic  string
	State  delayq.State // "" lists every state
	Cursor string
	Limit  int
}

// ListResult is a page of Store.List.
type ListResult struct {
	Jobs []*delayq.Job
	Next string // cursor of the next page; "" when done
}

// PauseParams are the arguments of Store.Pause.
type PauseParams struct {
	Topic string
	Until time.Time
}

// TickParams are the arguments of Store.Tick.
type TickParams struct {
	Now time.Time
	Max int // most jobs moved per call; <= 0 means a store default
	// Backoff holds, by topic, the backoff of topics whose policy has
	// one: a reserved job of such a topic whose TTR runs out goes delayed
	// until the expired Deadline plus BackoffDelay (ApplyTimeoutBackoff)
	// instead of ready at once. Nil or a topic not in it: ready at once.
	Backoff map[string]Backoff
	// Claim, when set, lets the store hand jobs this Tick makes ready
	// straight to the instance's waiting reserves, reserved in the
	// Tick's own write, instead of making them ready for the waiters to
	// reserve in a write of their own a moment later. A store may ignore
	// it (the stores whose reserve costs no round trip do). One that
	// uses it calls Claim at most once, after it knows which jobs this
	// Tick makes ready and before it writes, with the number made ready
	// per topic leaving out paused topics; Claim answers the reserves
	// that will take them. The store then reserves for each Take, in
	// order, up to its Max of those jobs (never one of a paused topic),
	// in priority-then-seq order, as Reserve would with the Take's Now
	// and By; the write that reserves any job is durable, as Reserve's
	// is. TickResult.Taken holds each Take's jobs, and Ready leaves the
	// jobs taken out.
	Claim func(ready map[string]int) []Take
}

// Take is one waiting reserve a Tick may hand jobs to (TickParams.Claim).
type Take struct {
	Topics []string
	Max    int
	Now    time.Time // when the reserve's TTR starts, as ReserveParams.Now
	By     string    // as ReserveParams.By
}

// TickResult is what Store.Tick did.
type TickResult struct {
	// Ready counts, per topic, the jobs made ready.
	Ready map[string]int
	// Lateness holds Now-Due of each delayed job made ready.
	Lateness []time.Duration
	// LatenessByTopic holds the same latenesses by the job's topic, for
	// per-topic history (the dashboard's charts).
	LatenessByTopic map[string][]time.Duration
	// Buried counts jobs buried because their attempts were spent.
	Buried int
	// BuriedByTopic counts the same buried jobs by topic (AddBuried), so
	// TTR expiries can be counted per topic.
	BuriedByTopic map[string]int
	// BackedOff counts jobs whose TTR ran out and that went delayed by
	// their topic's backoff (TickParams.Backoff) instead of ready;
	// BackedOffByTopic counts them by topic (AddBackedOff).
	BackedOff        int
	BackedOffByTopic map[string]int
	// Taken holds, when the store called TickParams.Claim, the jobs it
	// reserved for each Take Claim returned, in that order (an entry may
	// be empty); nil when it did not call Claim.
	Taken [][]*delayq.Job
	// Expired counts retained jobs removed because their retention ran
	// out (see Retention).
	Expired int
	// Next is the earliest Due or Deadline still pending, or, for a
	// store that removes expired retained jobs in Tick, the earliest
	// retention end; Now if more work is due already; zero if none.
	Next time.Time
}

// Event tells an instance about a change made by another instance of a
// shared store.
type Event struct {
	Topic string    // topic that gained ready jobs, if any
	Count int       // how many jobs Topic gained (0 counts as 1)
	Due   time.Time // an earlier due time or deadline, if any
}

// Notifier is implemented by stores shared by several instances
// (redisstore). The engine subscribes to learn of puts and releases made
// elsewhere, so its waiters and timer react at once.
type Notifier interface {
	// Notify returns a channel of events that closes when ctx is done.
	Notify(ctx context.Context) (<-chan Event, error)
}

// WaitMarker is implemented by Notifiers that leave out a ready-count
// event (Event.Topic) when no other instance has marked its topic as
// waited on (redisstore: a put whose wake-up has no one to wake then costs
// Redis nothing, where a Cluster's SPUBLISH was a fifth of a put's Redis
// time). Events of due times (Event.Due) are not marked: they step
// timers, which always listen.
//
// An engine over such a store calls MarkWaiting for the topics of a
// long-poll reserve after parking it and before the store attempt that
// follows, so no job made ready elsewhere is missed: a transition
// ordered before the mark was written is seen by the attempt, and one
// ordered after it sends its event to the parked waiter.
type WaitMarker interface {
	// MarkWaiting records that this instance has waiters on topics for
	// at least life from the call (the store may keep the mark longer).
	// Once it returns nil, every transition of another instance that
	// makes jobs of those topics ready, and is ordered after the call,
	// sends its Event.Topic to this instance until life has passed. An
	// error leaves the marks as they were: the engine's waiter still
	// waits, and may hear of jobs only when its long poll ends.
	MarkWaiting(ctx context.Context, topics []string, life time.Duration) error
}

// FreshPutter is implemented by stores for which checking that an id is
// not live is a cost worth skipping. The engine calls PutFresh instead of
// Put when it generated every id itself just now (UUIDv7: a millisecond
// timestamp and 74 random bits), so none can be live.
type FreshPutter interface {
	// PutFresh is Put for jobs whose ids cannot be live: it may skip the
	// duplicate-id check, and is otherwise the same (one durable write,
	// Seq assigned and written back).
	//
	// PutFresh may replace each job's ID with one of its own making, as
	// it sets Seq; it must stay a UUIDv7 (the engine's millisecond
	// timestamp kept) and be unique. The caller reads the ids back from
	// the jobs: they are what the producer is told (redisstore's carry
	// the seq, so its jobs need no id index).
	PutFresh(ctx context.Context, jobs []*delayq.Job) error
}

// ReserveJobParams are the arguments of Store.ReserveJob.
type ReserveJobParams struct {
	Ref delayq.Ref
	Now time.Time
	By  string // who reserves, kept in the attempt's By
}

// TopicStater is implemented by stores for which reading every topic's
// stats (Topics) costs a call per topic (redisstore). The engine counts
// one topic's jobs with it where that is all it needs: a put into a
// topic whose policy bounds its jobs.
type TopicStater interface {
	// TopicStats returns topic's stats; an unknown topic has zero counts.
	TopicStats(ctx context.Context, topic string) (delayq.TopicStats, error)
}

// Backuper is implemented by stores that can copy themselves while they
// serve (diskstore). A Redis-backed deployment backs up Redis instead.
type Backuper interface {
	// Backup writes a consistent copy of the store to w as a tar archive
	// that, extracted into an empty directory, the store opens as it is.
	Backup(ctx context.Context, w io.Writer) error
}

// Healther is implemented by stores that can be degraded while they still
// serve (diskstore below its free-space floor).
type Healther interface {
	// Health says why the store is degraded, or "" when it is well.
	Health() string
}
