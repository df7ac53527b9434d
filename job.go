package delayq

import (
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// State is where a job is in its life. Every live job is in exactly one
// state; deleted jobs are gone.
type State string

// The states of a job (see docs/states.md for the transitions).
const (
	StateDelayed  State = "delayed"  // waiting for its due time
	StateReady    State = "ready"    // due, waiting for a consumer
	StateReserved State = "reserved" // held by a consumer until its deadline
	StateBuried   State = "buried"   // dead-lettered until kicked
)

// The states of a retained job: one that ended and is kept, readable,
// for the store's retention (--retain) after it left the queue. A
// retained job is not live: no transition applies to it, and its id
// stays taken (the idempotency window) until it expires.
const (
	StateFinished State = "finished" // its consumer finished it (a delete with its reservation)
	StateDeleted  State = "deleted"  // deleted without being finished, while not buried
	StateFailed   State = "failed"   // deleted while buried: it failed for good
)

// Valid reports whether s is one of the four live states.
func (s State) Valid() bool {
	switch s {
	case StateDelayed, StateReady, StateReserved, StateBuried:
		return true
	}
	return false
}

// Retained reports whether s is one of the three states of a retained
// job (finished, deleted, failed).
func (s State) Retained() bool {
	switch s {
	case StateFinished, StateDeleted, StateFailed:
		return true
	}
	return false
}

// EndedState is the retained state of a job removed from the live
// state it was in: finished when its consumer deleted it under its
// reservation, failed when it was buried, deleted otherwise.
func EndedState(live State, finished bool) State {
	switch {
	case finished:
		return StateFinished
	case live == StateBuried:
		return StateFailed
	}
	return StateDeleted
}

// Outcome is how one attempt (one reservation) of a job ended.
type Outcome string

// The outcomes of an attempt. An attempt in progress has none.
const (
	OutcomeFinished   Outcome = "finished"    // its consumer finished the job
	OutcomeReleased   Outcome = "released"    // its consumer released the job
	OutcomeTTRExpired Outcome = "ttr_expired" // the TTR ran out
	OutcomeBuried     Outcome = "buried"      // its consumer buried the job, or the TTR ran out with the attempts spent
	OutcomeGaveBack   Outcome = "gave_back"   // the consumer went away before it got the job (costs no attempt)
	OutcomeDeleted    Outcome = "deleted"     // an operator deleted the job while it was reserved
)

// MaxHistory is how many attempts a job keeps: the most recent ones.
const MaxHistory = 20

// Attempt is one reservation of a job and how it ended.
type Attempt struct {
	N        int       // the job's Attempts when it was reserved (1 for the first)
	Reserved time.Time // when it was reserved
	By       string    // who reserved it: the principal, or the connection when there is no principal
	Ended    time.Time // zero while the attempt is in progress
	Outcome  Outcome   // "" while the attempt is in progress
	Reason   string    // the reason the consumer gave (release, bury), or ReasonTTRExpired
}

// StartAttempt appends a new attempt to j.History, dropping the oldest
// beyond MaxHistory. Stores call it in every reserve, after Attempts is
// incremented, so all keep the same history.
func (j *Job) StartAttempt(now time.Time, by string) {
	j.History = append(j.History, Attempt{N: j.Attempts, Reserved: now, By: by})
	if n := len(j.History) - MaxHistory; n > 0 {
		j.History = append(j.History[:0:0], j.History[n:]...)
	}
}

// EndAttempt ends the attempt in progress (the last one, when its
// Outcome is empty) with how and why; without one it does nothing.
func (j *Job) EndAttempt(now time.Time, how Outcome, reason string) {
	if n := len(j.History); n > 0 && j.History[n-1].Outcome == "" {
		j.History[n-1].Ended, j.History[n-1].Outcome, j.History[n-1].Reason = now, how, reason
	}
}

// Defaults applied by the front ends when a producer leaves a field out.
const (
	DefaultPriority uint32        = 1024
	DefaultTTR      time.Duration = 60 * time.Second
	MinTTR          time.Duration = time.Second
)

// Job is the unit of work. Times have millisecond precision.
type Job struct {
	ID          string        // unique among live jobs
	Seq         uint64        // assigned by the store, unique forever; the beanstalkd job id
	Topic       string        // the queue it belongs to
	Body        []byte        // opaque payload
	Priority    uint32        // lower is served first among ready jobs of a topic
	TTR         time.Duration // how long a consumer may hold it; at least MinTTR
	MaxAttempts int           // reserves allowed before it is buried; 0 = unlimited
	Attempts    int           // how many times it has been reserved
	State       State

	// Due is, for a delayed job, when it becomes ready; for a ready job,
	// when it became ready; for a buried job, when it was buried; for a
	// reserved job, when it was last due (kept for lateness figures).
	Due     time.Time
	Created time.Time
	// Delay is the delay given by the last put, release or update
	// (beanstalkd's stats-job "delay").
	Delay time.Duration

	// Reservation and Deadline are set only while the job is reserved.
	Reservation string
	Deadline    time.Time

	// Counters reported by beanstalkd's stats-job.
	Timeouts int // TTR expiries
	Releases int
	Buries   int
	Kicks    int

	// LastReason and LastFailed say why and when the job last failed: the
	// reason a consumer gave with its last release or bury (empty when it
	// gave none), or ReasonTTRExpired when its TTR ran out. Both are zero
	// while the job never failed.
	LastReason string
	LastFailed time.Time

	// History holds the job's most recent attempts (at most MaxHistory),
	// oldest first.
	History []Attempt

	// Ended is when a retained job ended (its State is then one of the
	// retained states); zero for a live job.
	Ended time.Time
}

// ReasonTTRExpired is the LastReason of a job whose TTR ran out.
const ReasonTTRExpired = "ttr expired"

// MaxReasonLen bounds a failure reason in bytes: enough for an error
// message, not for a stack dump kept on every job.
const MaxReasonLen = 1024

// CheckReason refuses a failure reason that is too long or not UTF-8
// text, so that every front end and the dashboard can show what is kept.
func CheckReason(reason string) error {
	if len(reason) > MaxReasonLen {
		return Invalid(CodeBadReason, "reason", "%d bytes, more than the %d a reason may have", len(reason), MaxReasonLen)
	}
	if !utf8.ValidString(reason) {
		return Invalid(CodeBadReason, "reason", "not valid UTF-8")
	}
	for _, r := range reason {
		if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f {
			return Invalid(CodeBadReason, "reason", "holds the control character %U; send text", r)
		}
	}
	return nil
}

// TruncateReason shortens text to a reason CheckReason accepts: at most
// MaxReasonLen bytes, cut at a character boundary, with control
// characters and invalid bytes replaced. Clients use it to turn a
// handler's error, which may be long, into a reason.
func TruncateReason(text string) string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.Map(func(r rune) rune {
		if r < 0x20 && r != '\t' && r != '\n' || r == 0x7f {
			return ' '
		}
		return r
	}, text)
	if len(text) <= MaxReasonLen {
		return text
	}
	const more = "…"
	cut := MaxReasonLen - len(more)
	for cut > 0 && !utf8.RuneStart(text[cut]) {
		cut--
	}
	return text[:cut] + more
}

// Clone returns a deep copy of j, so a store can hand out jobs without
// sharing its own memory.
func (j *Job) Clone() *Job {
	c := *j
	c.Body = append([]byte(nil), j.Body...)
	c.History = append([]Attempt(nil), j.History...)
	return &c
}

// ReservationToken is the token every store gives the attempts-th
// reservation of job seq. A stale consumer holds an older attempt's token,
// so it cannot act on the job once another consumer has reserved it.
func ReservationToken(seq uint64, attempts int) string {
	var b [48]byte // one allocation (the string) per reserve, not three
	t := strconv.AppendUint(b[:0], seq, 10)
	t = append(t, '-')
	return string(strconv.AppendInt(t, int64(attempts), 10))
}

// Ref names a job by ID, or by Seq when ID is empty (the beanstalkd
// protocol knows only seq). Reservation is the token a consumer got from
// reserve; consumer actions (finish, release, touch, bury) must present it.
type Ref struct {
	ID          string
	Seq         uint64
	Reservation string
}

// String names the job for error messages.
func (r Ref) String() string {
	if r.ID != "" {
		return strconv.Quote(r.ID)
	}
	return "#" + strconv.FormatUint(r.Seq, 10)
}

// TopicStats counts a topic's jobs per state.
type TopicStats struct {
	Name     string
	Delayed  int
	Ready    int
	Reserved int
	Buried   int
	// Urgent counts ready jobs with priority below DefaultPriority
	// (beanstalkd's current-jobs-urgent).
	Urgent int
	// OldestReady is the Due of the topic's oldest ready job; zero when
	// nothing is ready.
	OldestReady time.Time
	// PausedUntil is when a pause-tube ends; zero or past means not paused.
	PausedUntil time.Time
}

// Total is the number of live jobs in the topic.
func (t TopicStats) Total() int { return t.Delayed + t.Ready + t.Reserved + t.Buried }

// TruncMilli drops everything below the millisecond, the precision every
// store keeps.
func TruncMilli(t time.Time) time.Time { return t.Truncate(time.Millisecond) }

// CeilMilli rounds t up to the next millisecond, so a due time rounded to
// store precision is never earlier than asked.
func CeilMilli(t time.Time) time.Time {
	r := t.Truncate(time.Millisecond)
	if r.Before(t) {
		r = r.Add(time.Millisecond)
	}
	return r
}
