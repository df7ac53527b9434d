// Package engine owns delayq's semantics that do not depend on storage:
// validation and defaults, the timer loop that sleeps until the next due
// time, long-poll waiters per topic, reservations handed back when a caller
// goes away, metrics and draining on shutdown.
//
// It holds no job state: every transition is one call to a store.Store. Front
// ends (HTTP, beanstalkd) translate their protocol to Engine calls and
// nothing else.
package engine

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/store"
)

// Config tunes the engine. Zero values take the documented defaults.
type Config struct {
	// MaxBody is the largest job body in bytes. Default 65,535.
	MaxBody int
	// MaxWait is the longest a reserve may long-poll. Default 5 minutes.
	MaxWait time.Duration
	// MaxReserveTopics is the most topics one reserve may list. Default 1,000.
	MaxReserveTopics int
	// MaxWaiting is the most reserves waiting at once; more are refused
	// with too_many_waiting_reserves. Default 0: no bound.
	MaxWaiting int
	// MaxTopics is the most topics; a put that would make one more is
	// refused with too_many_topics. Default 0: no bound.
	MaxTopics int
	// TickBatch is the most jobs one store Tick moves. Default 1,000.
	// The first Tick of a timer step moves at most 64 (firstTickBatch), so
	// the first consumers of a burst are served before the rest is moved.
	TickBatch int
	// Logger receives the engine's log lines. Default slog.Default().
	Logger *slog.Logger
	// Metrics records the engine's figures. Default: a fresh set.
	Metrics *metrics.Metrics
	// PolicyRefresh is how often Run reloads the topic policies over a
	// store shared by several instances (a store.Notifier), so a policy
	// set on another instance takes effect here within it. Default 2 s.
	PolicyRefresh time.Duration
	// Fired, when set, is told after each timer step of the delayed jobs
	// it made ready: per topic, their lateness (package history keeps
	// the dashboard's charts from it). It runs on the timer's goroutine,
	// so it must be quick and must not block.
	Fired func(topic string, lateness []time.Duration)
	// PreciseTimer wakes the timer through a kernel timer (a timerfd, on
	// Linux) rather than a time.Timer, which can be up to a millisecond
	// late on an idle process. The server sets it. It stays off under
	// testing/synctest: the kernel timer follows the real clock, not the
	// bubble's, and its reader blocks outside the bubble's reach.
	PreciseTimer bool
}

func (c *Config) setDefaults() {
	if c.MaxBody <= 0 {
		c.MaxBody = delayq.MaxBodyDefault
	}
	if c.MaxWait <= 0 {
		c.MaxWait = delayq.MaxWaitDefault
	}
	if c.MaxReserveTopics <= 0 {
		c.MaxReserveTopics = 1000
	}
	if c.TickBatch <= 0 {
		c.TickBatch = 1000
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.PolicyRefresh <= 0 {
		c.PolicyRefresh = DefaultPolicyRefresh
	}
}

// DefaultPolicyRefresh is Config.PolicyRefresh's default: the longest a
// policy change made on one instance takes to reach the others.
const DefaultPolicyRefresh = 2 * time.Second

// Engine is delayq's core. Its methods are safe for concurrent use.
type Engine struct {
	// st is the store as the engine's calls use it: reservations signed
	// and checked, calls by job checked against the context's TopicCheck
	// (reservation.go). base is the store itself, for its optional
	// interfaces.
	st      store.Store
	base    store.Store
	cfg     Config
	log     *slog.Logger
	metrics *metrics.Metrics
	waiters *waiters
	// marker is base as a store.WaitMarker, or nil; marks is what this
	// engine marked there (waitmarks.go).
	marker store.WaitMarker
	marks  waitMarks
	guards guards
	pol    policies

	tickErrs repeatLog // the timer's failures, logged without flooding

	// wake has capacity 1: sends never block and coalesce, so any number
	// of puts between two timer steps cost one extra step.
	wake chan struct{}

	mu      sync.Mutex
	next    time.Time // guarded by mu: when the timer will next step; zero = idle
	ticking bool      // guarded by mu: a timer step is running

	drainOnce sync.Once
	draining  chan struct{} // closed by Drain
}

// New returns an engine over st. Call Run to start its timer.
func New(st store.Store, cfg Config) *Engine {
	cfg.setDefaults()
	e := &Engine{
		st:       newSealed(st),
		base:     st,
		cfg:      cfg,
		log:      cfg.Logger,
		metrics:  cfg.Metrics,
		waiters:  newWaiters(),
		marker:   waitMarker(st),
		marks:    waitMarks{m: map[string]*topicMark{}},
		wake:     make(chan struct{}, 1),
		draining: make(chan struct{}),
	}
	if e.metrics == nil {
		e.metrics = metrics.New(st.Topics)
	}
	if co, ok := st.(store.CommitObserver); ok {
		co.ObserveCommits(e.metrics.Commit)
	}
	return e
}

// Config returns the engine's configuration with defaults applied.
func (e *Engine) Config() Config { return e.cfg }

// Metrics returns the engine's metrics.
func (e *Engine) Metrics() *metrics.Metrics { return e.metrics }

// Drain puts the engine in shutdown mode: long-polls return at once with
// what they have, and puts and reserves fail with ErrDraining. In-flight
// transitions finish. It is safe to call more than once.
func (e *Engine) Drain() {
	e.drainOnce.Do(func() { close(e.draining) })
}

// Draining reports whether Drain was called.
func (e *Engine) Draining() bool {
	select {
	case <-e.draining:
		return true
	default:
		return false
	}
}

// record counts a job operation on one job with the outcome of err and
// passes err through.
func (e *Engine) record(op string, err error) error { return e.recordN(op, 1, err) }

// recordN counts a job operation that handled n jobs (delayq_operations_
// total counts jobs, not calls): on success n under "ok", on failure 1
// under the error code, whatever the call's size.
func (e *Engine) recordN(op string, n int, err error) error {
	if err == nil {
		e.metrics.Op(op, "ok", n)
		return nil
	}
	e.metrics.Op(op, resultCode(err), 1)
	return err
}

// recordAdmin counts a call that acts on no job (pause, resume, policy,
// backup) with the outcome of err, and passes err through.
func (e *Engine) recordAdmin(op string, err error) error {
	if err == nil {
		e.metrics.Admin(op, "ok")
		return nil
	}
	e.metrics.Admin(op, resultCode(err))
	return err
}

// resultCode is the result label of a failed operation.
func resultCode(err error) string {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "canceled"
	}
	return delayq.CodeOf(err)
}
