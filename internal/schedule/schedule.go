// Package schedule runs periodic jobs: a schedule puts one job into a
// topic at each tick of a cron spec or a fixed interval.
//
// The job of a tick has the deterministic id "{name}:{tick unix ms}" and
// goes through the engine's normal put path. A tick fires exactly once
// even when many instances share a store (redisstore), across restarts
// and failover, because every scheduler follows one protocol on the
// schedule's durable record (store.ScheduleStore, compare-and-set on Rev):
//
//  1. claim: set Last = tick, Pending, Lease = now + lease. Only one
//     scheduler's compare-and-set wins; the others read the record again
//     and see the tick is taken.
//  2. put the tick's job, due at the tick. It is put up to Lead before the
//     tick, so it is still delayed (and cannot have been consumed) while
//     another scheduler could take the claim over. ErrExists counts as put.
//  3. confirm: clear Pending.
//
// A scheduler that dies between 1 and 3 leaves Pending; after Lease
// another one takes the claim over and puts the job again, which is
// ErrExists when the first put happened. A tick is never fired before
// its time (the job is due at the tick) and never twice, with one
// exception documented in docs/schedules.md: a claimer dying between its
// put and its confirm when every other scheduler is also away until the
// job has been consumed and finished.
package schedule

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
)

// Missed-tick policies: what happens to the ticks that passed while no
// scheduler ran (the server, or every instance, was down).
const (
	MissedSkip = "skip" // fire none of them (the default)
	MissedOne  = "one"  // fire the latest one
	MissedAll  = "all"  // fire each, at most MaxMissed (the latest ones)
)

// MaxMissed bounds the missed ticks MissedAll fires after an outage.
const MaxMissed = 1000

// MaxNameLen leaves room in a job id (at most delayq.MaxNameLen bytes) for
// ":" and a tick's milliseconds up to year 9999.
const MaxNameLen = delayq.MaxNameLen - 1 - 15

// Putter is the engine's put path, which every tick's job takes, and its
// lookup, which tells a tick's job that is there from one whose put is
// still in flight elsewhere (see fire).
type Putter interface {
	Put(ctx context.Context, reqs []engine.PutRequest) ([]*delayq.Job, error)
	Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error)
}

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// MaxBody is the largest job body, checked when a schedule is saved so
	// that a schedule whose every put would fail is refused up front.
	// Default delayq.MaxBodyDefault.
	MaxBody int
	// Lead is how long before its tick a tick's job is put (delayed until
	// the tick). Default 500 ms.
	Lead time.Duration
	// Lease is how long a claim stays with its scheduler before another
	// may take it over; shorter than Lead, and cut to end a fifth of it
	// before the tick (leaseEnd), so a takeover happens while the job
	// still waits for its tick. Default 250 ms.
	Lease time.Duration
	// Grace is how late a tick may be and still count as on time; older
	// ticks are missed and follow the schedule's policy. Default 1 s.
	Grace time.Duration
	// Refresh is how often the scheduler rereads every schedule, to see
	// changes made through other instances. Default 1 s.
	Refresh time.Duration
	// Logger receives the scheduler's log lines. Default slog.Default().
	Logger *slog.Logger
	// Registry, when set, gets the scheduler's metrics
	// (delayq_schedule_ticks_total).
	Registry prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.MaxBody <= 0 {
		c.MaxBody = delayq.MaxBodyDefault
	}
	if c.Lead <= 0 {
		c.Lead = 500 * time.Millisecond
	}
	if c.Lease <= 0 {
		c.Lease = 250 * time.Millisecond
	}
	if c.Grace <= 0 {
		c.Grace = time.Second
	}
	if c.Refresh <= 0 {
		c.Refresh = time.Second
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Service manages schedules (the API's calls) and fires them (Run).
type Service struct {
	st  store.ScheduleStore
	put Putter
	cfg Config
	log *slog.Logger
	met *counters

	// wake has capacity 1: a change made here makes Run look again at
	// once; changes coalesce.
	wake chan struct{}

	mu      sync.Mutex
	timings map[string]*timing // parsed specs by spec+"\x00"+zone; guarded by mu
}

// New returns a service over st that puts jobs through put.
func New(st store.ScheduleStore, put Putter, cfg Config) *Service {
	cfg.setDefaults()
	return &Service{st: st, put: put, cfg: cfg, log: cfg.Logger, met: newCounters(cfg.Registry),
		wake: make(chan struct{}, 1), timings: map[string]*timing{}}
}

// Def is a schedule's definition as an operator gives it. Exactly one of
// Cron and Every is set.
type Def struct {
	Name        string
	Topic       string
	Cron        string        // cron spec (seconds optional) or descriptor
	Every       time.Duration // fixed interval
	Body        []byte
	TTR         time.Duration // 0: delayq.DefaultTTR
	Priority    *uint32       // nil: delayq.DefaultPriority
	MaxAttempts int
	Timezone    string // IANA zone; "" is UTC
	Missed      string // "" is MissedSkip
}

// mapErr turns a store's not-found into the service's.
func mapErr(name string, err error) error {
	if errors.Is(err, store.ErrScheduleNotFound) {
		return delayq.NotFound("schedule %q not found", clip(name))
	}
	return err
}

// ValidName reports whether name can name a schedule: 1 to MaxNameLen
// bytes of [A-Za-z0-9_.-], so that "{name}:{ms}" is a valid job id and a
// name never contains the ":" that separates the tick.
func ValidName(name string) bool {
	return delayq.ValidObjectName(name, MaxNameLen)
}

// CheckName returns a *delayq.ValidationError for an invalid name.
func CheckName(name string) error {
	if !ValidName(name) {
		return delayq.Invalid(delayq.CodeBadScheduleName, "name", "%q is not a valid schedule name (1-%d bytes of [A-Za-z0-9_.-])", clip(name), MaxNameLen)
	}
	return nil
}

// JobID is the id of the job a schedule puts for tick.
func JobID(name string, tick time.Time) string {
	return name + ":" + strconv.FormatInt(tick.UnixMilli(), 10)
}

// validate checks d and returns its spec string and parsed timing.
func (s *Service) validate(d *Def, now time.Time) (string, *timing, error) {
	if err := CheckName(d.Name); err != nil {
		return "", nil, err
	}
	if err := delayq.CheckTopic(d.Topic); err != nil {
		return "", nil, err
	}
	if len(d.Body) > s.cfg.MaxBody {
		return "", nil, delayq.Invalid(delayq.CodeBodyTooBig, "body", "%d bytes, at most %d", len(d.Body), s.cfg.MaxBody)
	}
	if d.TTR == 0 {
		d.TTR = delayq.DefaultTTR
	}
	if d.TTR < delayq.MinTTR || d.TTR > engine.MaxTTR {
		return "", nil, delayq.Invalid(delayq.CodeBadTTR, "ttr", "%s is not between %s and %s", d.TTR, delayq.MinTTR, engine.MaxTTR)
	}
	if d.MaxAttempts < 0 {
		return "", nil, delayq.Invalid(delayq.CodeBadMaxAttempts, "max_attempts", "%d is negative", d.MaxAttempts)
	}
	switch d.Missed {
	case "":
		d.Missed = MissedSkip
	case MissedSkip, MissedOne, MissedAll:
	default:
		return "", nil, delayq.Invalid(delayq.CodeBadMissed, "missed", "%q is not skip, one or all", clip(d.Missed))
	}
	var spec string
	switch {
	case d.Cron != "" && d.Every != 0:
		return "", nil, delayq.Invalid(delayq.CodeBadCron, "cron", "give cron or every, not both")
	case d.Every < 0:
		return "", nil, delayq.Invalid(delayq.CodeBadEvery, "every", "%s is negative", d.Every)
	case d.Every > 0:
		if d.Every < MinEvery {
			return "", nil, delayq.Invalid(delayq.CodeBadEvery, "every", "%s is under the minimum of %s", d.Every, MinEvery)
		}
		spec = "@every " + d.Every.String()
	case d.Cron != "":
		spec = d.Cron
	default:
		return "", nil, delayq.Invalid(delayq.CodeBadCron, "cron", "give cron (a cron spec or @every/@hourly/...) or every")
	}
	tm, err := parseTiming(spec, d.Timezone, now)
	if err != nil {
		return "", nil, err
	}
	return spec, tm, nil
}

// Put creates or replaces the schedule d names, and reports whether it
// created it. Replacing keeps the firing state (Last: a tick already fired
// is never fired again) and the pause; a change of spec or zone starts
// the new ticks from now.
func (s *Service) Put(ctx context.Context, d Def) (*store.Schedule, bool, error) {
	now := delayq.TruncMilli(time.Now())
	spec, _, err := s.validate(&d, now)
	if err != nil {
		return nil, false, err
	}
	pri := delayq.DefaultPriority
	if d.Priority != nil {
		pri = *d.Priority
	}
	for {
		old, err := s.st.GetSchedule(ctx, d.Name)
		if err != nil && !errors.Is(err, store.ErrScheduleNotFound) {
			return nil, false, err
		}
		sc := &store.Schedule{
			Name: d.Name, Topic: d.Topic, Body: d.Body, TTR: d.TTR, Priority: pri, MaxAttempts: d.MaxAttempts,
			Spec: spec, Timezone: d.Timezone, Missed: d.Missed,
			Created: now, Updated: now, Anchor: now, Since: now, Rev: store.NewRev(),
		}
		var prev uint64
		if old != nil {
			prev = old.Rev
			sc.Created, sc.Paused = old.Created, old.Paused
			sc.Last, sc.Pending, sc.Lease = old.Last, old.Pending, old.Lease
			if old.Spec == sc.Spec && old.Timezone == sc.Timezone {
				sc.Anchor, sc.Since = old.Anchor, old.Since
			}
		}
		err = s.st.SaveSchedule(ctx, sc, prev)
		if errors.Is(err, store.ErrScheduleConflict) {
			continue // changed meanwhile (a tick fired): read it again
		}
		if err != nil {
			return nil, false, err
		}
		s.poke()
		return sc, old == nil, nil
	}
}

// Get returns the schedule named name.
func (s *Service) Get(ctx context.Context, name string) (*store.Schedule, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	sc, err := s.st.GetSchedule(ctx, name)
	return sc, mapErr(name, err)
}

// List returns every schedule, sorted by name.
func (s *Service) List(ctx context.Context) ([]*store.Schedule, error) {
	return s.st.ListSchedules(ctx)
}

// Delete removes the schedule named name. Jobs it already put stay.
func (s *Service) Delete(ctx context.Context, name string) error {
	if err := CheckName(name); err != nil {
		return err
	}
	if err := s.st.DeleteSchedule(ctx, name); err != nil {
		return mapErr(name, err)
	}
	s.poke()
	return nil
}

// SetPaused pauses or resumes the schedule named name. A resumed schedule
// fires from now on: the ticks it slept through are not missed ticks.
func (s *Service) SetPaused(ctx context.Context, name string, paused bool) (*store.Schedule, error) {
	if err := CheckName(name); err != nil {
		return nil, err
	}
	for {
		old, err := s.st.GetSchedule(ctx, name)
		if err != nil {
			return nil, mapErr(name, err)
		}
		if old.Paused == paused {
			return old, nil
		}
		sc := old.Clone()
		sc.Paused, sc.Updated, sc.Rev = paused, delayq.TruncMilli(time.Now()), store.NewRev()
		if !paused {
			sc.Since = sc.Updated
		}
		err = s.st.SaveSchedule(ctx, sc, old.Rev)
		if errors.Is(err, store.ErrScheduleConflict) {
			continue
		}
		if err != nil {
			return nil, mapErr(name, err)
		}
		s.poke()
		return sc, nil
	}
}

// Next returns the next n ticks of sc from now on (none while paused is
// not assumed: a paused schedule shows what it would fire when resumed).
func (s *Service) Next(sc *store.Schedule, n int) []time.Time {
	tm, err := s.timing(sc)
	if err != nil {
		return nil
	}
	t := latest(sc.Last, sc.Since)
	if now := time.Now(); now.After(t) {
		t = now
	}
	out := make([]time.Time, 0, n)
	for len(out) < n {
		t = tm.next(t, sc.Anchor)
		if t.IsZero() {
			break
		}
		out = append(out, t)
	}
	return out
}

// timing parses sc's spec, once per spec and zone.
func (s *Service) timing(sc *store.Schedule) (*timing, error) {
	key := sc.Spec + "\x00" + sc.Timezone
	s.mu.Lock()
	tm, ok := s.timings[key]
	s.mu.Unlock()
	if ok {
		return tm, nil
	}
	// Parsed at "now" only to check the spec fires at all; a stored spec
	// passed that check when it was saved.
	tm, err := parseTiming(sc.Spec, sc.Timezone, sc.Created)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	if len(s.timings) > 10000 { // specs of deleted schedules
		clear(s.timings)
	}
	s.timings[key] = tm
	s.mu.Unlock()
	return tm, nil
}

// poke makes Run look at the schedules again at once.
func (s *Service) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Schedule is a schedule as the Service hands it out. Front ends name it
// through this package, which owns schedules' semantics, not through the
// store that keeps them (see the import rules in docs/architecture.md).
type Schedule = store.Schedule
