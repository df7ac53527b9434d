package alarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/metrics"
	"github.com/delayq/delayq/internal/store"
)

// Event states.
const (
	StateFiring   = "firing"
	StateResolved = "resolved"
)

// failureWindow is the span failures_per_min_over counts over, and
// lateness_p99_over looks back over.
const failureWindow = time.Minute

// Condition is one condition of an alarm for one topic as this instance
// last evaluated it, with the firing state all instances share.
type Condition struct {
	Topic, Condition string
	Value, Threshold float64 // counts, seconds, or failures per minute
	Firing           bool
	Since            time.Time // when it started to hold, while Firing
}

// state is an alarm's firing state, the document of KindState.
type state struct {
	Firing []firing `json:"firing"`
}

// firing is one (topic, condition) of an alarm that holds.
type firing struct {
	Topic     string    `json:"topic"`
	Condition string    `json:"condition"`
	Value     float64   `json:"value"`
	Threshold float64   `json:"threshold"`
	Since     time.Time `json:"since"`
	Sent      time.Time `json:"sent"` // the last firing event
}

// snapshot is the failure counts at one evaluation of the topics an
// alarm with a failure condition watched then: a copy of every topic's
// counts, kept for a minute at each evaluation, cost about 7 copies of
// every topic ever counted when nothing even read them.
type snapshot struct {
	at     time.Time
	counts map[string]failures
	// mark is the highest metrics.TopicCounts.Gen then: a topic missing
	// from counts with a Gen above it was first counted after the
	// snapshot (so from zero since), one at or below it was not watched
	// then (so its count then is not known).
	mark uint64
}

// failures is one topic's failure count and the Gen of its counters.
type failures struct{ n, gen uint64 }

// measure is one instance's own figures, the document of KindMeasure.
type measure struct {
	At       time.Time                `json:"at"`
	Lateness map[string]time.Duration `json:"lateness_p99,omitempty"`
	Failures map[string]uint64        `json:"failures,omitempty"` // over the last minute
}

// figures are every topic's values at one evaluation.
type figures struct {
	topics   map[string]delayq.TopicStats
	lateness map[string]time.Duration
	failures map[string]uint64
}

// Evaluate checks every alarm at now once, writes what changed in their
// firing state and queues the events of the changes this instance's write
// won. Run calls it every Interval; tests call it with the times they
// choose.
func (s *Service) Evaluate(ctx context.Context, now time.Time) error {
	defer s.evals.Add(1)
	alarms, err := s.List(ctx)
	if err != nil {
		return err
	}
	states, err := s.ds.ListDocs(ctx, KindState)
	if err != nil {
		return err
	}
	fig, err := s.figures(ctx, now, alarms)
	if err != nil {
		return err
	}
	byName := make(map[string]*store.Doc, len(states))
	for _, d := range states {
		byName[d.Name] = d
	}
	var errs []error
	for _, a := range alarms {
		if err := s.evaluate(ctx, a, byName[a.Name], fig, now); err != nil {
			errs = append(errs, fmt.Errorf("alarm %q: %w", a.Name, err))
		}
		delete(byName, a.Name)
	}
	for name := range byName { // the state of a deleted alarm
		if err := s.ds.DeleteDoc(ctx, KindState, name); err != nil && !errors.Is(err, store.ErrDocNotFound) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// figures gathers the values conditions compare: job counts from the
// store, lateness and failures from this instance, and over a shared
// store from every live instance.
func (s *Service) figures(ctx context.Context, now time.Time, alarms []*Alarm) (*figures, error) {
	fig := &figures{topics: map[string]delayq.TopicStats{}, lateness: map[string]time.Duration{}, failures: map[string]uint64{}}
	ts, err := s.src.Topics(ctx)
	if err != nil {
		return nil, err
	}
	for _, t := range ts {
		fig.topics[t.Name] = t
		if s.src.LatenessP99 != nil {
			if d, ok := s.src.LatenessP99(t.Name, now.Add(-failureWindow)); ok {
				fig.lateness[t.Name] = d
			}
		}
	}
	fig.failures = s.recentFailures(now, alarms)
	if s.cfg.Shared {
		if err := s.share(ctx, now, fig); err != nil {
			return nil, err
		}
	}
	return fig, nil
}

// recentFailures is each watched topic's failures over the last minute:
// the count now less the count at the newest evaluation at least a minute
// old (or the oldest one kept, while the service is younger than a
// minute). Only topics an alarm with a failure condition matches are
// kept; a topic just watched counts its failures since it was.
func (s *Service) recentFailures(now time.Time, alarms []*Alarm) map[string]uint64 {
	out := map[string]uint64{}
	if s.src.Failures == nil {
		return out
	}
	var watching []*Alarm
	for _, a := range alarms {
		if a.FailuresPerMinOver != nil {
			watching = append(watching, a)
		}
	}
	cur := snapshot{at: now, counts: map[string]failures{}}
	for topic, c := range s.src.Failures() {
		cur.mark = max(cur.mark, c.Gen)
		if slices.ContainsFunc(watching, func(a *Alarm) bool { return a.Matches(topic) }) {
			cur.counts[topic] = failures{c.Failures(), c.Gen}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.window = append(s.window, cur)
	base := 0
	for i, sn := range s.window {
		if !sn.at.After(now.Add(-failureWindow)) {
			base = i
		}
	}
	s.window = s.window[base:]
	for topic, c := range cur.counts {
		if b, ok := since(s.window, topic, c.gen); ok && c.n > b {
			out[topic] = c.n - b
		}
	}
	return out
}

// since is topic's failure count at the oldest snapshot of window that
// knows it for counters gen: its count there, or 0 when the counters
// began after that snapshot. A topic first watched during the window thus
// counts its failures since then.
func since(window []snapshot, topic string, gen uint64) (uint64, bool) {
	for _, sn := range window {
		if b, ok := sn.counts[topic]; ok && b.gen == gen {
			return b.n, true
		}
		if gen > sn.mark {
			return 0, true
		}
	}
	return 0, false
}

// share publishes this instance's lateness and failures and adds those
// of the other live instances to fig: the highest p99, the summed
// failures. An instance silent for three intervals is left out.
func (s *Service) share(ctx context.Context, now time.Time, fig *figures) error {
	mine := measure{At: now.UTC(), Lateness: fig.lateness, Failures: fig.failures}
	b, err := json.Marshal(&mine)
	if err != nil {
		return err
	}
	d := &store.Doc{Name: s.cfg.Instance, Rev: store.NewRev(), Data: b}
	prev := uint64(0)
	if cur, err := s.ds.GetDoc(ctx, KindMeasure, s.cfg.Instance); err == nil {
		prev = cur.Rev
	} else if !errors.Is(err, store.ErrDocNotFound) {
		return err
	}
	if err := s.ds.SaveDoc(ctx, KindMeasure, d, prev); err != nil && !errors.Is(err, store.ErrDocConflict) {
		return err
	}
	all, err := s.ds.ListDocs(ctx, KindMeasure)
	if err != nil {
		return err
	}
	for _, d := range all {
		if d.Name == s.cfg.Instance {
			continue
		}
		var m measure
		if json.Unmarshal(d.Data, &m) != nil {
			continue
		}
		if age := now.Sub(m.At); age > 3*s.cfg.Interval || age < -3*s.cfg.Interval {
			if age > 100*s.cfg.Interval { // long gone: tidy up
				_ = s.ds.DeleteDoc(ctx, KindMeasure, d.Name)
			}
			continue
		}
		for t, l := range m.Lateness {
			fig.lateness[t] = max(fig.lateness[t], l)
		}
		for t, n := range m.Failures {
			fig.failures[t] += n
		}
	}
	return nil
}

// value is what condition cond reads for topic.
func (f *figures) value(cond, topic string, now time.Time) float64 {
	switch cond {
	case CondBuried:
		return float64(f.topics[topic].Buried)
	case CondOldestReady:
		t, ok := f.topics[topic]
		if !ok {
			return 0
		}
		return metrics.OldestReadyAge(t, now).Seconds()
	case CondLatenessP99:
		return f.lateness[topic].Seconds()
	case CondFailures:
		return float64(f.failures[topic])
	}
	return 0
}

// names is every topic any figure knows, sorted.
func (f *figures) names() []string {
	set := map[string]bool{}
	for t := range f.topics {
		set[t] = true
	}
	for t := range f.lateness {
		set[t] = true
	}
	for t := range f.failures {
		set[t] = true
	}
	out := make([]string, 0, len(set))
	for t := range set {
		out = append(out, t)
	}
	slices.Sort(out)
	return out
}

// evaluate checks one alarm against its state document (nil: none yet).
func (s *Service) evaluate(ctx context.Context, a *Alarm, doc *store.Doc, fig *figures, now time.Time) error {
	var st state
	var prev uint64
	if doc != nil {
		if err := json.Unmarshal(doc.Data, &st); err != nil {
			s.log.Warn("alarms: stored state does not decode; starting afresh", "alarm", a.Name, "err", err)
			st = state{}
		}
		prev = doc.Rev
	}
	was := map[[2]string]*firing{}
	for i := range st.Firing {
		f := &st.Firing[i]
		was[[2]string{f.Topic, f.Condition}] = f
	}
	var next state
	var events []api.AlarmEvent
	var seen []Condition
	changed := false
	event := func(f *firing, state string, value float64) {
		events = append(events, api.AlarmEvent{Alarm: a.Name, Topic: f.Topic, Condition: f.Condition, Value: value,
			Threshold: f.Threshold, Since: api.Time{Time: f.Since}, State: state, At: api.Time{Time: now}})
	}
	for _, topic := range fig.names() {
		if !a.Matches(topic) {
			continue
		}
		for _, th := range a.thresholds() {
			v := fig.value(th.cond, topic, now)
			c := Condition{Topic: topic, Condition: th.cond, Value: v, Threshold: th.value}
			if v > th.value {
				key := [2]string{topic, th.cond}
				f := was[key]
				delete(was, key)
				switch {
				case f == nil:
					f = &firing{Topic: topic, Condition: th.cond, Since: now.UTC(), Sent: now.UTC()}
					f.Value, f.Threshold = v, th.value
					event(f, StateFiring, v)
					changed = true
				case a.Repeat > 0 && now.Sub(f.Sent) >= a.Repeat:
					f.Sent, f.Value, f.Threshold = now.UTC(), v, th.value
					event(f, StateFiring, v)
					changed = true
				}
				next.Firing = append(next.Firing, *f)
				c.Firing, c.Since = true, f.Since
			}
			seen = append(seen, c)
		}
	}
	for _, f := range st.Firing { // held before, not now (or no longer watched)
		if _, gone := was[[2]string{f.Topic, f.Condition}]; !gone {
			continue
		}
		event(&f, StateResolved, fig.value(f.Condition, f.Topic, now))
		changed = true
	}
	s.mu.Lock()
	s.seen[a.Name] = seen
	s.mu.Unlock()
	if !changed {
		return nil
	}
	b, err := json.Marshal(&next)
	if err != nil {
		return err
	}
	err = s.ds.SaveDoc(ctx, KindState, &store.Doc{Name: a.Name, Rev: store.NewRev(), Data: b}, prev)
	if errors.Is(err, store.ErrDocConflict) {
		return nil // another instance evaluated first; its events are sent by it
	}
	if err != nil {
		return err
	}
	for _, ev := range events {
		s.enqueue(a, ev)
	}
	return nil
}

// Status returns the conditions of alarm name: what this instance's last
// evaluation saw, with the firing state all instances share (a firing
// condition this instance has not evaluated yet is listed too).
func (s *Service) Status(ctx context.Context, name string) ([]Condition, error) {
	var st state
	d, err := s.ds.GetDoc(ctx, KindState, name)
	switch {
	case err == nil:
		if err := json.Unmarshal(d.Data, &st); err != nil {
			return nil, fmt.Errorf("alarm: decode state of %q: %w: %v", name, delayq.ErrUnavailable, err)
		}
	case !errors.Is(err, store.ErrDocNotFound):
		return nil, err
	}
	s.mu.Lock()
	out := slices.Clone(s.seen[name])
	s.mu.Unlock()
	firing := map[[2]string]firing{}
	for _, f := range st.Firing {
		firing[[2]string{f.Topic, f.Condition}] = f
	}
	for i := range out {
		c := &out[i]
		f, ok := firing[[2]string{c.Topic, c.Condition}]
		c.Firing, c.Since = ok, f.Since
		delete(firing, [2]string{c.Topic, c.Condition})
	}
	for _, f := range st.Firing {
		if _, ok := firing[[2]string{f.Topic, f.Condition}]; ok {
			out = append(out, Condition{Topic: f.Topic, Condition: f.Condition, Value: f.Value, Threshold: f.Threshold, Firing: true, Since: f.Since})
		}
	}
	return out, nil
}
