package alarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/store"
)

// KindState is the DocStore kind of an alarm's firing state, one document
// per alarm, named as the alarm. It is apart from the definition so that
// an evaluation's write never races an operator's PUT.
const KindState = "alarm_state"

// KindMeasure is the DocStore kind of each instance's own measurements
// (lateness, failures) when instances share a store (Config.Shared), one
// document per instance.
const KindMeasure = "alarm_measure"

// Defaults of Config.
const (
	DefaultInterval = 10 * time.Second
	DefaultTimeout  = 5 * time.Second
	DefaultRetries  = 5
	DefaultBackoff  = time.Second
	maxBackoff      = time.Minute
	queueLen        = 64 // events waiting per alarm before new ones are dropped
)

// Sources are where the conditions' values come from.
type Sources struct {
	// Topics returns every topic's job counts (the engine's Topics).
	Topics func(context.Context) ([]delayq.TopicStats, error)
	// LatenessP99 returns the 99th percentile of topic's fire lateness
	// over fires since since, and false when there were none (package
	// history). Nil: lateness conditions never hold.
	LatenessP99 func(topic string, since time.Time) (time.Duration, bool)
	// Failures returns each topic's counters (package metrics: ByTopic);
	// alarms read TopicCounts.Failures, TTR expiries, releases and
	// buries, taken as differences while TopicCounts.Gen stays the same.
	// Nil: failure conditions never hold.
	Failures func() map[string]metrics.TopicCounts
}

// Config tunes a Service. Zero values take the defaults.
type Config struct {
	// Interval is the time between evaluations. Default 10 s.
	Interval time.Duration
	// Timeout bounds one POST of an event. Default 5 s.
	Timeout time.Duration
	// Retries is how many times a failed POST is tried again, with
	// backoff doubling from Backoff (default 1 s) up to a minute, before
	// the event is given up and logged. Default 5.
	Retries int
	Backoff time.Duration
	// Shared says that other instances share the store (Redis): each then
	// publishes its lateness and failure figures, and every instance
	// evaluates on the figures of all (lateness: the highest p99;
	// failures: the sum).
	Shared bool
	// Instance names this instance's measurement document (Shared).
	Instance string
	// AllowNets are the networks events may be sent to besides public
	// addresses: loopback, private, link-local and other special-purpose
	// addresses are refused unless one of these holds them (dest.go).
	AllowNets []netip.Prefix
	// Client sends the events. Default: a client of its own, which
	// checks every address it connects to against AllowNets and follows
	// no redirect. A client given here is used as it is.
	Client *http.Client
	// Logger receives failed sends and store errors. Default: discard.
	Logger *slog.Logger
	// Registry, when set, gets delayq_alarm_events_total.
	Registry prometheus.Registerer
}

func (c *Config) setDefaults() {
	if c.Interval <= 0 {
		c.Interval = DefaultInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Retries < 0 {
		c.Retries = 0
	} else if c.Retries == 0 {
		c.Retries = DefaultRetries
	}
	if c.Backoff <= 0 {
		c.Backoff = DefaultBackoff
	}
	if c.Client == nil {
		c.Client = newClient(destPolicy{allow: c.AllowNets})
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
}

// Service keeps alarms in a DocStore, evaluates them (Run, Evaluate) and
// sends their events.
type Service struct {
	ds  store.DocStore
	src Sources
	cfg Config
	log *slog.Logger
	met *counters

	mu      sync.Mutex
	seen    map[string][]Condition // per alarm, what the last evaluation saw; guarded by mu
	window  []snapshot             // failure counts of recent evaluations; guarded by mu
	senders map[string]*sender     // per alarm; guarded by mu
	sendCtx context.Context        // ends in-flight sends on Close
	stop    context.CancelFunc
	wg      sync.WaitGroup // the senders
	closed  bool           // guarded by mu
	evals   atomic.Uint64  // evaluations done (Evaluations)
}

// New returns a service over ds. It evaluates nothing until Run or
// Evaluate.
func New(ds store.DocStore, src Sources, cfg Config) *Service {
	cfg.setDefaults()
	ctx, stop := context.WithCancel(context.Background())
	return &Service{ds: ds, src: src, cfg: cfg, log: cfg.Logger, met: newCounters(cfg.Registry), seen: map[string][]Condition{},
		senders: map[string]*sender{}, sendCtx: ctx, stop: stop}
}

// Config returns the configuration with defaults applied.
func (s *Service) Config() Config { return s.cfg }

// notFound is the error for an unknown alarm name.
func notFound(name string) error { return delayq.NotFound("alarm %q not found", clip(name)) }

func decode(d *store.Doc) (*Alarm, error) {
	var a Alarm
	if err := json.Unmarshal(d.Data, &a); err != nil {
		return nil, fmt.Errorf("alarm: decode %q: %w: %v", d.Name, delayq.ErrUnavailable, err)
	}
	a.Name, a.Rev = d.Name, d.Rev
	return &a, nil
}

// Put creates or replaces the alarm a (validated by FromRequest) and
// reports whether it was created. A replaced alarm keeps its firing
// state: a condition that still holds is not announced again, one that
// no longer exists resolves at the next evaluation.
func (s *Service) Put(ctx context.Context, a *Alarm) (*Alarm, bool, error) {
	if err := CheckName(a.Name); err != nil {
		return nil, false, err
	}
	if err := (destPolicy{allow: s.cfg.AllowNets}).checkURL(a.URL); err != nil {
		return nil, false, err
	}
	for {
		now := time.Now().UTC()
		n := *a
		n.Created, n.Updated, n.Rev = now, now, store.NewRev()
		var prev uint64
		cur, err := s.ds.GetDoc(ctx, store.KindAlarm, a.Name)
		switch {
		case err == nil:
			old, err := decode(cur)
			if err != nil {
				return nil, false, err
			}
			n.Created, prev = old.Created, cur.Rev
			if n.Secret == api.SecretMask { // a definition read back and put again
				n.Secret = old.Secret
			}
		case !errors.Is(err, store.ErrDocNotFound):
			return nil, false, err
		}
		if n.Secret == api.SecretMask {
			return nil, false, delayq.Invalid(delayq.CodeBadAlarmSecret, "secret", "%s stands for a stored secret, and alarm %q has none: give the secret itself", api.SecretMask, a.Name)
		}
		b, err := json.Marshal(&n)
		if err != nil {
			return nil, false, fmt.Errorf("alarm: encode: %w", err)
		}
		err = s.ds.SaveDoc(ctx, store.KindAlarm, &store.Doc{Name: n.Name, Rev: n.Rev, Data: b}, prev)
		if errors.Is(err, store.ErrDocConflict) {
			continue // changed meanwhile: apply ours over the new one
		}
		if err != nil {
			return nil, false, err
		}
		return &n, prev == 0, nil
	}
}

// Get returns the alarm named name, or an error matching delayq.ErrNotFound.
func (s *Service) Get(ctx context.Context, name string) (*Alarm, error) {
	d, err := s.ds.GetDoc(ctx, store.KindAlarm, name)
	if errors.Is(err, store.ErrDocNotFound) {
		return nil, notFound(name)
	}
	if err != nil {
		return nil, err
	}
	return decode(d)
}

// List returns every alarm, by name.
func (s *Service) List(ctx context.Context) ([]*Alarm, error) {
	ds, err := s.ds.ListDocs(ctx, store.KindAlarm)
	if err != nil {
		return nil, err
	}
	out := make([]*Alarm, 0, len(ds))
	for _, d := range ds {
		a, err := decode(d)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// Delete removes the alarm and its state, or returns an error matching delayq.ErrNotFound.
// A firing alarm deleted sends no resolved event.
func (s *Service) Delete(ctx context.Context, name string) error {
	err := s.ds.DeleteDoc(ctx, store.KindAlarm, name)
	if errors.Is(err, store.ErrDocNotFound) {
		return notFound(name)
	}
	if err != nil {
		return err
	}
	if err := s.ds.DeleteDoc(ctx, KindState, name); err != nil && !errors.Is(err, store.ErrDocNotFound) {
		s.log.Warn("alarms: deleting the state of a deleted alarm failed; the next evaluation removes it", "alarm", name, "err", err)
	}
	s.mu.Lock()
	delete(s.seen, name)
	s.mu.Unlock()
	return nil
}

// Run evaluates every Interval until ctx is done, then stops the senders
// (Close) and returns nil. An evaluation that fails is logged and the
// next one is tried at the next interval.
func (s *Service) Run(ctx context.Context) error {
	defer s.Close()
	t := time.NewTicker(s.cfg.Interval)
	defer t.Stop()
	for {
		if err := s.Evaluate(ctx, time.Now()); err != nil && ctx.Err() == nil {
			s.log.Warn("alarms: evaluation failed; trying again at the next interval", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Evaluations is how many evaluations have finished, failed ones
// included, so tests and operators can wait for the next one.
func (s *Service) Evaluations() uint64 { return s.evals.Load() }

// Close ends in-flight sends (their events are logged as given up) and
// waits for the senders. Later events are dropped.
func (s *Service) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.stop()
	s.wg.Wait()
	s.cfg.Client.CloseIdleConnections()
}
