package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq"
)

// ScheduleStore keeps periodic jobs' schedules. Backends keep them as
// documents (Schedules over a DocStore); the server runs schedules only
// over stores that implement DocStore.
//
// A schedule is one record written whole. Every write is a compare-and-set
// on Rev, so instances that share a store (redisstore) can race to fire
// the same tick and exactly one wins: that is what makes a tick fire once.
// Writes are durable before they return, as job transitions are.
type ScheduleStore interface {
	// GetSchedule returns the schedule named name, or an error wrapping
	// ErrScheduleNotFound.
	GetSchedule(ctx context.Context, name string) (*Schedule, error)

	// ListSchedules returns every schedule, sorted by name.
	ListSchedules(ctx context.Context) ([]*Schedule, error)

	// SaveSchedule writes s if the stored schedule of that name has Rev
	// prev, or, with prev 0, if there is none. s.Rev must be a new
	// revision (NewRev). Otherwise it returns an error wrapping
	// ErrScheduleConflict and changes nothing.
	SaveSchedule(ctx context.Context, s *Schedule, prev uint64) error

	// DeleteSchedule removes the schedule named name, or returns an error
	// wrapping ErrScheduleNotFound.
	DeleteSchedule(ctx context.Context, name string) error
}

// ErrScheduleNotFound: no schedule has that name. It wraps
// delayq.ErrNotFound so front ends answer it as they answer an unknown job.
var ErrScheduleNotFound = fmt.Errorf("schedule not found: %w", delayq.ErrNotFound)

// ErrScheduleConflict: the schedule changed since the caller read it (or
// exists when the caller meant to create it). The caller reads it again.
var ErrScheduleConflict = errors.New("store: schedule changed concurrently")

// Schedule is a periodic job: its definition, set by an operator, and its
// firing state, advanced by the scheduler. Stores keep it as it is given
// (times with millisecond precision) and interpret none of it but Name
// and Rev.
type Schedule struct {
	Name string `json:"name"`
	// Topic, Body, TTR, Priority and MaxAttempts are those of every job
	// the schedule puts.
	Topic       string        `json:"topic"`
	Body        []byte        `json:"body"`
	TTR         time.Duration `json:"ttr"`
	Priority    uint32        `json:"priority"`
	MaxAttempts int           `json:"max_attempts"`
	// Spec is a cron spec with seconds or a descriptor ("@every 90s",
	// "@hourly").
	Spec string `json:"spec"`
	// Timezone is the IANA zone cron fields are read in; "" is UTC.
	Timezone string `json:"timezone,omitempty"`
	// Missed says what happens to ticks that passed while no scheduler
	// ran: "skip", "one" or "all".
	Missed string `json:"missed"`
	Paused bool   `json:"paused,omitempty"`

	Created time.Time `json:"created"`
	Updated time.Time `json:"updated"`
	// Anchor is where "@every" ticks are counted from (Anchor + k·every),
	// so every instance computes the same ticks.
	Anchor time.Time `json:"anchor"`
	// Since: only ticks after it are fired (set at creation, at a change
	// of timing and at resume, so those never fire the past).
	Since time.Time `json:"since"`
	// Last is the latest tick claimed: fired, or being fired while
	// Pending. Ticks at or before it are never fired again.
	Last time.Time `json:"last,omitzero"`
	// Pending is set while the claimer of Last puts its job; Lease is
	// when another scheduler may take the claim over (the claimer died).
	Pending bool      `json:"pending,omitempty"`
	Lease   time.Time `json:"lease,omitzero"`

	// Rev is the revision this record was written as; SaveSchedule
	// compares it.
	Rev uint64 `json:"rev"`
}

// Clone returns a deep copy, so stores hand out records callers may keep.
func (s *Schedule) Clone() *Schedule {
	c := *s
	c.Body = append([]byte(nil), s.Body...)
	return &c
}
