package engine

import (
	"context"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/store"
)

// Wait marks: over a store that sends another instance's ready counts
// only to instances that marked the topic as waited on
// (store.WaitMarker), a long-poll reserve marks its topics after parking
// its waiter and before the store attempt that follows (markWaiting).
// A job made ready elsewhere before the mark was written is then found
// by that attempt, and one made ready after it is announced to the
// parked waiter. The first waiter of a topic pays one store round trip;
// the next ones, while the mark is trusted, pay nothing; Run's renewal
// loop rewrites the marks of topics that still have waiters
// (renewMarks), so a long wait keeps its mark and waiters that come in a
// steady stream seldom wait for one. A mark that lapses costs latency,
// never a job: the waiter's long poll ends and its consumer retries.
const (
	// markLife is how long a mark lasts in the store.
	markLife = 15 * time.Second
	// markTrust is how long after a mark was sent a waiter relies on it
	// without writing it again: well inside markLife, so a mark a waiter
	// relied on outlives a slow round trip and the renewal's period.
	markTrust = 10 * time.Second
	// markRenew is how old a mark of a topic with waiters is when the
	// renewal loop writes it again; the loop looks every markRenew/2.
	markRenew = 5 * time.Second
	// markTimeout bounds one write of marks, which runs apart from the
	// reserve that asked for it (others may wait for the same write).
	markTimeout = 5 * time.Second
)

// waitMarks is what this engine has marked in the store, per topic.
type waitMarks struct {
	mu   sync.Mutex
	m    map[string]*topicMark // guarded by mu
	errs repeatLog             // guarded by mu: failed writes, logged without flooding
}

// topicMark is one topic's mark.
type topicMark struct {
	at      time.Time     // when the last write that succeeded began; zero for none
	writing chan struct{} // while a write is in flight: closed when it ends
}

// markWaiting makes sure the store holds a trusted mark of this
// instance on each of topics before it returns (or ctx ends): it writes
// the marks missing or too old, or waits for a write of them already in
// flight. A failed write is logged and the reserve goes on: its waiter
// then may hear of jobs made ready elsewhere only when its wait ends.
func (e *Engine) markWaiting(ctx context.Context, topics []string) {
	if e.marker == nil {
		return
	}
	now := time.Now()
	var mine []string
	var wait []chan struct{}
	ch := make(chan struct{})
	e.marks.mu.Lock()
	for _, t := range topics {
		m := e.marks.m[t]
		if m == nil {
			m = &topicMark{}
			e.marks.m[t] = m
		}
		switch {
		case !m.at.IsZero() && now.Sub(m.at) < markTrust:
		case m.writing != nil:
			wait = append(wait, m.writing)
		default:
			m.writing = ch
			mine = append(mine, t)
		}
	}
	e.marks.mu.Unlock()
	if len(mine) > 0 {
		wait = append(wait, ch)
		// Apart from ctx: other waiters of these topics wait for this
		// write, whether or not this reserve's caller stays.
		go e.writeMarks(mine, ch)
	}
	for _, c := range wait {
		select {
		case <-c:
		case <-ctx.Done():
			return
		}
	}
}

// writeMarks writes this instance's marks on topics, whose writing is
// ch, and closes ch.
func (e *Engine) writeMarks(topics []string, ch chan struct{}) {
	ctx, cancel := context.WithTimeout(context.Background(), markTimeout)
	defer cancel()
	start := time.Now()
	err := e.marker.MarkWaiting(ctx, topics, markLife)
	e.marks.mu.Lock()
	for _, t := range topics {
		if m := e.marks.m[t]; m != nil {
			if err == nil {
				m.at = start
			}
			m.writing = nil
		}
	}
	logIt := err != nil && e.marks.errs.log(start, err)
	if err == nil {
		e.marks.errs.clear()
	}
	e.marks.mu.Unlock()
	close(ch)
	if logIt {
		e.log.Warn("could not mark topics as waited on; their waiters may hear of jobs put elsewhere only when their wait ends", "topics", len(topics), "err", err)
	}
}

// renewMarks rewrites, every markRenew/2 until ctx ends, the marks of
// the topics that still have waiters once they are markRenew old, and
// forgets those of topics without waiters once they are no longer
// trusted (their marks lapse in the store by themselves).
func (e *Engine) renewMarks(ctx context.Context) {
	t := time.NewTicker(markRenew / 2)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		ch := make(chan struct{})
		var due []string
		e.marks.mu.Lock()
		for topic, m := range e.marks.m {
			if m.writing != nil {
				continue
			}
			if e.waiters.count(topic) == 0 {
				if now.Sub(m.at) >= markTrust {
					delete(e.marks.m, topic)
				}
				continue
			}
			if now.Sub(m.at) >= markRenew {
				m.writing = ch
				due = append(due, topic)
			}
		}
		e.marks.mu.Unlock()
		if len(due) > 0 {
			e.writeMarks(due, ch)
		}
	}
}

// waitMarker returns st as a store.WaitMarker, or nil.
func waitMarker(st store.Store) store.WaitMarker {
	wm, _ := st.(store.WaitMarker)
	return wm
}
