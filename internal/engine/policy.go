package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Policy is a topic's policy: defaults for the jobs put into it without
// their own, a backoff for jobs that come back unfinished, and a bound on
// how many jobs it holds. A zero field sets nothing.
type Policy struct {
	// TTR is the ttr of jobs put without one.
	TTR time.Duration
	// MaxAttempts is the max_attempts of jobs put without one.
	MaxAttempts int
	// Backoff delays a job released without a delay, or whose TTR ran
	// out, by Backoff.Delay(id, attempts); nil: ready at once.
	Backoff *store.Backoff
	// MaxJobs bounds the topic's live jobs (every state); a put past it
	// is refused with topic_full.
	MaxJobs int
}

// PolicySpec is a policy as a client asks for it: nil fields are absent.
// NewPolicy checks it and fills the backoff's defaults.
type PolicySpec struct {
	TTR         *time.Duration
	MaxAttempts *int
	Backoff     *BackoffSpec
	MaxJobs     *int
}

// BackoffSpec is a backoff as a client asks for it: Initial is needed;
// Max defaults to DefaultBackoffMax (or Initial when that is longer),
// Factor to 2 and Jitter to 0.
type BackoffSpec struct {
	Initial *time.Duration
	Max     *time.Duration
	Factor  *float64
	Jitter  *float64
}

// Bounds of a policy's backoff.
const (
	DefaultBackoffMax    = time.Hour
	MaxBackoff           = 365 * 24 * time.Hour // a deadline plus this stays far from overflow
	MaxBackoffFactor     = 100.0
	DefaultBackoffFactor = 2.0
)

// NewPolicy checks spec, field by field with a named code, and returns
// the policy it asks for.
func NewPolicy(spec PolicySpec) (Policy, error) {
	var p Policy
	if spec.TTR == nil && spec.MaxAttempts == nil && spec.Backoff == nil && spec.MaxJobs == nil {
		return p, delayq.Invalid(delayq.CodeBadPolicy, "", "the policy sets nothing (ttr, max_attempts, backoff, max_jobs); DELETE it to have none")
	}
	if spec.TTR != nil {
		if err := checkTTR(*spec.TTR); err != nil {
			return p, err
		}
		p.TTR = spec.TTR.Truncate(time.Millisecond)
	}
	if spec.MaxAttempts != nil {
		if *spec.MaxAttempts < 1 {
			return p, delayq.Invalid(delayq.CodeBadMaxAttempts, "max_attempts", "%d is not at least 1 (leave it out for unlimited attempts)", *spec.MaxAttempts)
		}
		p.MaxAttempts = *spec.MaxAttempts
	}
	if spec.MaxJobs != nil {
		if *spec.MaxJobs < 1 {
			return p, delayq.Invalid(delayq.CodeBadMaxJobs, "max_jobs", "%d is not at least 1 (leave it out for no bound)", *spec.MaxJobs)
		}
		p.MaxJobs = *spec.MaxJobs
	}
	if spec.Backoff != nil {
		b, err := newBackoff(*spec.Backoff)
		if err != nil {
			return p, err
		}
		p.Backoff = &b
	}
	return p, nil
}

func newBackoff(s BackoffSpec) (store.Backoff, error) {
	bad := func(field, format string, args ...any) (store.Backoff, error) {
		return store.Backoff{}, delayq.Invalid(delayq.CodeBadBackoff, "backoff."+field, format, args...)
	}
	if s.Initial == nil {
		return bad("initial", "is needed: the delay of the first retry (\"1s\")")
	}
	b := store.Backoff{Initial: *s.Initial, Factor: DefaultBackoffFactor}
	if b.Initial < time.Millisecond || b.Initial > MaxBackoff {
		return bad("initial", "%s is not between 1ms and %s", b.Initial, MaxBackoff)
	}
	b.Initial = b.Initial.Truncate(time.Millisecond)
	b.Max = max(DefaultBackoffMax, b.Initial)
	if s.Max != nil {
		b.Max = s.Max.Truncate(time.Millisecond)
		if b.Max < b.Initial || b.Max > MaxBackoff {
			return bad("max", "%s is not between initial (%s) and %s", *s.Max, b.Initial, MaxBackoff)
		}
	}
	if s.Factor != nil {
		b.Factor = *s.Factor
		if !(b.Factor >= 1 && b.Factor <= MaxBackoffFactor) { // NaN fails too
			return bad("factor", "%v is not between 1 and %v", *s.Factor, MaxBackoffFactor)
		}
	}
	if s.Jitter != nil {
		b.Jitter = *s.Jitter
		if !(b.Jitter >= 0 && b.Jitter <= 1) {
			return bad("jitter", "%v is not between 0 and 1", *s.Jitter)
		}
	}
	return b, nil
}

// policyDoc is a policy as the DocStore keeps it (KindPolicy, named by
// its topic): durations in milliseconds, so the encoding never changes
// with Go's duration text.
type policyDoc struct {
	TTRMS       int64       `json:"ttr_ms,omitempty"`
	MaxAttempts int         `json:"max_attempts,omitempty"`
	Backoff     *backoffDoc `json:"backoff,omitempty"`
	MaxJobs     int         `json:"max_jobs,omitempty"`
}

type backoffDoc struct {
	InitialMS int64   `json:"initial_ms"`
	MaxMS     int64   `json:"max_ms"`
	Factor    float64 `json:"factor"`
	Jitter    float64 `json:"jitter"`
}

func encodePolicy(p Policy) ([]byte, error) {
	d := policyDoc{TTRMS: p.TTR.Milliseconds(), MaxAttempts: p.MaxAttempts, MaxJobs: p.MaxJobs}
	if b := p.Backoff; b != nil {
		d.Backoff = &backoffDoc{b.Initial.Milliseconds(), b.Max.Milliseconds(), b.Factor, b.Jitter}
	}
	return json.Marshal(d)
}

func decodePolicy(data []byte) (Policy, error) {
	var d policyDoc
	if err := json.Unmarshal(data, &d); err != nil {
		return Policy{}, err
	}
	p := Policy{TTR: time.Duration(d.TTRMS) * time.Millisecond, MaxAttempts: d.MaxAttempts, MaxJobs: d.MaxJobs}
	if b := d.Backoff; b != nil {
		p.Backoff = &store.Backoff{Initial: time.Duration(b.InitialMS) * time.Millisecond,
			Max: time.Duration(b.MaxMS) * time.Millisecond, Factor: b.Factor, Jitter: b.Jitter}
	}
	return p, nil
}

// policySet is the engine's copy of every topic's policy, read whole from
// the store and swapped whole: the put, release and timer paths read it
// without a store call.
type policySet struct {
	byTopic  map[string]Policy
	backoffs map[string]store.Backoff // the topics with a backoff, for TickParams
}

func (s *policySet) get(topic string) (Policy, bool) {
	if s == nil {
		return Policy{}, false
	}
	p, ok := s.byTopic[topic]
	return p, ok
}

// policies keeps the engine's policySet fresh: loaded on first use, again
// after each of this engine's own writes, and, over a store shared by
// several instances (a store.Notifier), every Config.PolicyRefresh by
// Run, so a change made on another instance takes effect here within
// that interval.
type policies struct {
	mu  sync.Mutex
	set *policySet // guarded by mu; nil until loaded
	// started numbers the reloads in the order they began to read, and
	// applied is the number of the one set holds (both guarded by mu): a
	// reload that began before a write but ends after the write's own
	// reload must not put the older read back.
	started, applied uint64
	// putMu makes the count-then-put of topics with a max_jobs one step
	// with respect to the engine's other puts into such topics.
	putMu sync.Mutex
}

// policySet returns the engine's copy of the policies, loading it the
// first time.
func (e *Engine) policySet(ctx context.Context) (*policySet, error) {
	e.pol.mu.Lock()
	set := e.pol.set
	e.pol.mu.Unlock()
	if set != nil {
		return set, nil
	}
	return e.reloadPolicies(ctx)
}

// reloadPolicies reads every policy from the store and swaps the copy.
func (e *Engine) reloadPolicies(ctx context.Context) (*policySet, error) {
	ds := e.st
	e.pol.mu.Lock()
	e.pol.started++
	gen := e.pol.started
	e.pol.mu.Unlock()
	docs, err := ds.ListDocs(ctx, store.KindPolicy)
	if err != nil {
		return nil, err
	}
	set := &policySet{byTopic: make(map[string]Policy, len(docs)), backoffs: map[string]store.Backoff{}}
	for _, d := range docs {
		p, err := decodePolicy(d.Data)
		if err != nil {
			e.log.Error("unreadable topic policy; ignored", "topic", d.Name, "err", err)
			continue
		}
		set.byTopic[d.Name] = p
		if p.Backoff != nil {
			set.backoffs[d.Name] = *p.Backoff
		}
	}
	e.pol.mu.Lock()
	defer e.pol.mu.Unlock()
	if gen <= e.pol.applied {
		// A later read is in place, or a write since this read began
		// made it stale (afterPolicyWrite): it may serve its own caller,
		// which began before the write, but never replaces the copy.
		return set, nil
	}
	e.pol.set, e.pol.applied = set, gen
	return set, nil
}

// refreshPolicies reloads the policies every interval until ctx is done
// (Run starts it over shared stores).
func (e *Engine) refreshPolicies(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if _, err := e.reloadPolicies(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("reloading topic policies failed; keeping the last ones", "err", err)
			}
		}
	}
}

// SetPolicy makes p topic's policy, replacing any it had, durably. It
// reports whether the topic had none before.
func (e *Engine) SetPolicy(ctx context.Context, topic string, p Policy) (created bool, err error) {
	defer func() { err = e.recordAdmin("policy", err) }()
	if err := delayq.CheckTopic(topic); err != nil {
		return false, err
	}
	ds := e.st
	data, err := encodePolicy(p)
	if err != nil {
		return false, err
	}
	// Compare-and-set, again while another writer races us: the last
	// writer wins whole, as a PUT should.
	for range 10 {
		var prev uint64
		old, err := ds.GetDoc(ctx, store.KindPolicy, topic)
		switch {
		case err == nil:
			prev = old.Rev
		case !errors.Is(err, store.ErrDocNotFound):
			return false, err
		}
		err = ds.SaveDoc(ctx, store.KindPolicy, &store.Doc{Name: topic, Rev: store.NewRev(), Data: data}, prev)
		if errors.Is(err, store.ErrDocConflict) {
			continue
		}
		if err != nil {
			return false, err
		}
		e.afterPolicyWrite(ctx)
		return prev == 0, nil
	}
	return false, fmt.Errorf("engine: topic %q's policy keeps changing concurrently: %w", topic, delayq.ErrUnavailable)
}

// noPolicy is the error for a topic without a policy.
func noPolicy(topic string) error { return delayq.NotFound("topic %q has no policy", topic) }

// GetPolicy returns topic's policy as the store holds it now (not the
// engine's copy, which may be a refresh behind over Redis).
func (e *Engine) GetPolicy(ctx context.Context, topic string) (Policy, error) {
	if err := delayq.CheckTopic(topic); err != nil {
		return Policy{}, err
	}
	ds := e.st
	d, err := ds.GetDoc(ctx, store.KindPolicy, topic)
	if errors.Is(err, store.ErrDocNotFound) {
		return Policy{}, noPolicy(topic)
	}
	if err != nil {
		return Policy{}, err
	}
	p, err := decodePolicy(d.Data)
	if err != nil {
		return Policy{}, fmt.Errorf("engine: topic %q's stored policy: %v: %w", topic, err, delayq.ErrUnavailable)
	}
	return p, nil
}

// Policies returns every topic's policy, from the store.
func (e *Engine) Policies(ctx context.Context) (map[string]Policy, error) {
	set, err := e.reloadPolicies(ctx)
	if err != nil {
		return nil, err
	}
	return set.byTopic, nil
}

// DeletePolicy removes topic's policy; its jobs keep the ttr and
// max_attempts they were put with.
func (e *Engine) DeletePolicy(ctx context.Context, topic string) (err error) {
	defer func() { err = e.recordAdmin("policy", err) }()
	if err := delayq.CheckTopic(topic); err != nil {
		return err
	}
	ds := e.st
	if err := ds.DeleteDoc(ctx, store.KindPolicy, topic); err != nil {
		if errors.Is(err, store.ErrDocNotFound) {
			return noPolicy(topic)
		}
		return err
	}
	e.afterPolicyWrite(ctx)
	return nil
}

// afterPolicyWrite reloads the engine's copy after its own write, so the
// change applies here at once. It first retires every reload that began
// before the write returned (they may have read the old policies), so
// none of them can install its read afterwards, whatever this reload's
// fate. The reload runs on a context of its own: the write is durable
// already, and a client that hangs up now must not make the copy go
// stale. If it fails anyway the copy is dropped (the next put loads it
// again) rather than the write reported as failed.
func (e *Engine) afterPolicyWrite(ctx context.Context) {
	e.pol.mu.Lock()
	e.pol.applied = e.pol.started
	e.pol.set = nil
	e.pol.mu.Unlock()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), policyReloadTimeout)
	defer cancel()
	if _, err := e.reloadPolicies(rctx); err != nil {
		e.log.Warn("reloading topic policies after a change failed; reloading on next use", "err", err)
	}
}

// policyReloadTimeout bounds the reload after a policy write, which no
// longer ends with the request: a store that does not answer must not
// hold the request forever.
const policyReloadTimeout = 10 * time.Second

// defaults returns r's ttr, priority and max_attempts with what the
// producer left out (nil) filled in: the ttr and max_attempts of the
// topic's policy in set, if it has them, else r.DefaultTTR (or
// delayq.DefaultTTR), delayq.DefaultPriority and no bound on attempts.
// This is the one place defaults are applied, whatever the protocol.
func defaults(set *policySet, r *PutRequest) (ttr time.Duration, pri uint32, attempts int) {
	p, _ := set.get(r.Topic)
	switch {
	case r.TTR != nil:
		ttr = *r.TTR
	case p.TTR > 0:
		ttr = p.TTR
	case r.DefaultTTR > 0:
		ttr = r.DefaultTTR
	default:
		ttr = delayq.DefaultTTR
	}
	pri = delayq.DefaultPriority
	if r.Priority != nil {
		pri = *r.Priority
	}
	switch {
	case r.MaxAttempts != nil:
		attempts = *r.MaxAttempts
	case p.MaxAttempts > 0:
		attempts = p.MaxAttempts
	}
	return ttr, pri, attempts
}

// capped returns, per topic of jobs whose policy has a max_jobs, how
// many of jobs go into it.
func capped(set *policySet, jobs []*delayq.Job) map[string]int {
	var out map[string]int
	for _, j := range jobs {
		if p, ok := set.get(j.Topic); ok && p.MaxJobs > 0 {
			if out == nil {
				out = map[string]int{}
			}
			out[j.Topic]++
		}
	}
	return out
}

// checkFull refuses a put that would take a topic past its max_jobs. The
// caller holds pol.putMu, so on one instance the count and the put are
// one step; instances sharing a Redis each check on their own, so there
// the bound may be passed by the puts in flight on other instances.
func (e *Engine) checkFull(ctx context.Context, set *policySet, adding map[string]int) error {
	live, err := e.liveJobs(ctx, adding)
	if err != nil {
		return err
	}
	for topic, n := range adding {
		p, _ := set.get(topic)
		if live[topic]+n > p.MaxJobs {
			return &delayq.LimitError{Code: delayq.CodeTopicFull, Retry: true,
				Reason: fmt.Sprintf("topic %q holds %d jobs and its policy's max_jobs is %d; %d more do not fit", topic, live[topic], p.MaxJobs, n)}
		}
	}
	return nil
}

// releaseBackoff is the delay of a release without one: the backoff of
// the job's topic for its attempts so far, or 0. It reads the job only
// when some topic has a backoff.
func (e *Engine) releaseBackoff(ctx context.Context, ref delayq.Ref) (time.Duration, error) {
	set, err := e.policySet(ctx)
	if err != nil || len(set.backoffs) == 0 {
		return 0, err
	}
	j, err := e.st.Get(ctx, delayq.Ref{ID: ref.ID, Seq: ref.Seq})
	if err != nil {
		return 0, delayq.ForJob(ref, err)
	}
	b, ok := set.backoffs[j.Topic]
	if !ok {
		return 0, nil
	}
	return b.Delay(j.ID, j.Attempts), nil
}

// liveJobs counts the live jobs (every state) of each topic of topics:
// one topic at a time where the store offers it (store.TopicStater), else
// from every topic's stats.
func (e *Engine) liveJobs(ctx context.Context, topics map[string]int) (map[string]int, error) {
	live := make(map[string]int, len(topics))
	if ts, ok := e.base.(store.TopicStater); ok {
		for topic := range topics {
			t, err := ts.TopicStats(ctx, topic)
			if err != nil {
				return nil, err
			}
			live[topic] = t.Total()
		}
		return live, nil
	}
	stats, err := e.st.Topics(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range stats {
		if _, ok := topics[t.Name]; ok {
			live[t.Name] = t.Total()
		}
	}
	return live, nil
}
