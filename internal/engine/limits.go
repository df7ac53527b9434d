package engine

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
)

// guards are the engine's server-wide bounds: reserves parked waiting (each
// holds a goroutine, a connection and a timer) and the count of topics
// (each costs the store and the metrics a series). Zero bounds nothing.
type guards struct {
	waiting atomic.Int64
	topics  topicGuard
}

// enterWait counts one more waiting reserve, or refuses it over the bound.
// The caller calls exitWait when it got past enterWait.
func (e *Engine) enterWait() error {
	if e.cfg.MaxWaiting <= 0 {
		return nil
	}
	if n := e.guards.waiting.Add(1); n > int64(e.cfg.MaxWaiting) {
		e.guards.waiting.Add(-1)
		return &delayq.LimitError{Code: delayq.CodeTooManyWaiting, Retry: true,
			Reason: fmt.Sprintf("%d reserves are waiting already (--max-waiting-reserves); retry later or reserve without wait", e.cfg.MaxWaiting)}
	}
	return nil
}

func (e *Engine) exitWait() {
	if e.cfg.MaxWaiting > 0 {
		e.guards.waiting.Add(-1)
	}
}

// topicGuard refuses a put that would make more than MaxTopics topics,
// without asking the store on every put: it keeps the names it has seen
// (from the store's Topics and from puts since), and asks the store again,
// at most once a second, only when that set is full. The set may hold
// topics that have since emptied, so it errs towards asking, never towards
// letting a topic in over the bound (on this instance; instances sharing a
// Redis each check on their own).
type topicGuard struct {
	mu      sync.Mutex
	known   map[string]struct{} // guarded by mu
	fetched time.Time           // guarded by mu: last Topics call
}

// refetchEvery spaces the store's Topics calls when the set is full.
const refetchEvery = time.Second

// checkTopics returns a *delayq.LimitError when reqs name a topic that is
// new and the bound is reached.
func (e *Engine) checkTopics(ctx context.Context, reqs []PutRequest) error {
	max := e.cfg.MaxTopics
	if max <= 0 {
		return nil
	}
	g := &e.guards.topics
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known == nil {
		g.known = make(map[string]struct{})
	}
	for i := range reqs {
		t := reqs[i].Topic
		if _, ok := g.known[t]; ok {
			continue
		}
		if len(g.known) >= max && time.Since(g.fetched) >= refetchEvery {
			stats, err := e.st.Topics(ctx)
			if err != nil {
				return err
			}
			g.fetched = time.Now()
			g.known = make(map[string]struct{}, len(stats))
			for _, s := range stats {
				g.known[s.Name] = struct{}{}
			}
			if _, ok := g.known[t]; ok {
				continue
			}
		}
		if len(g.known) >= max {
			return &delayq.LimitError{Code: delayq.CodeTopicLimit,
				Reason: fmt.Sprintf("topic %q would be one more than the %d topics allowed (--max-topics)", t, max)}
		}
		g.known[t] = struct{}{}
	}
	return nil
}
