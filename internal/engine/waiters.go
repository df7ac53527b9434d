package engine

import (
	"container/list"
	"sort"
	"sync"

	"github.com/delayq/delayq"
)

// waiters parks long-polling reserves per topic. n jobs made ready wake
// the waiters, oldest first, whose takes (how many jobs each asked for)
// cover n, and no more (no thundering herd): one job wakes one waiter,
// and ten jobs wake a single waiter that takes up to sixteen, rather than
// ten, nine of which would find nothing and run an empty reserve each.
// wake removes each woken waiter from every topic it waits on.
type waiters struct {
	mu      sync.Mutex
	byTopic map[string]*list.List // guarded by mu; elements are *waiter
	woken   int                   // guarded by mu: signals sent, for tests of herd behaviour
}

// waiter is one parked reserve. ch has capacity 1 and receives at most one
// signal, because a signalled waiter is no longer on any list.
type waiter struct {
	ch       chan struct{}
	topics   []string
	take     int             // how many jobs the reserve asks for (at least 1)
	by       string          // who reserves (ReserveRequest.By)
	elems    []*list.Element // guarded by waiters.mu; nil once signalled, claimed or removed
	signaled string          // guarded by waiters.mu: the topic that woke it
	jobs     int             // guarded by waiters.mu: how many of its jobs the wake counted on it for
	// A timer step may claim a waiter to hand it jobs reserved in its
	// own store write (claim, handOff).
	claimed bool          // guarded by waiters.mu: claimed, not handed yet
	gone    bool          // guarded by waiters.mu: its reserve left while claimed
	handed  []*delayq.Job // guarded by waiters.mu: jobs handed to it, not taken yet
}

func newWaiters() *waiters {
	return &waiters{byTopic: make(map[string]*list.List)}
}

// add parks a new waiter on topics, for a reserve of up to take jobs by
// by.
func (ws *waiters) add(topics []string, take int, by string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1), topics: topics, take: max(take, 1), by: by}
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, t := range topics {
		l := ws.byTopic[t]
		if l == nil {
			l = list.New()
			ws.byTopic[t] = l
		}
		w.elems = append(w.elems, l.PushBack(w))
	}
	return w
}

// wake signals the waiters of topic, oldest first, that n jobs made
// ready there need: each takes as many as it asked for, until n are
// accounted for.
func (ws *waiters) wake(topic string, n int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	l := ws.byTopic[topic]
	for n > 0 && l != nil && l.Len() > 0 {
		w := l.Front().Value.(*waiter)
		ws.unlink(w)
		w.signaled = topic
		w.jobs = min(n, w.take)
		n -= w.jobs
		ws.woken++
		w.ch <- struct{}{}
	}
}

// wakeAll signals every waiter of topic (a pause ended: each may find
// jobs, however many are ready).
func (ws *waiters) wakeAll(topic string) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	l := ws.byTopic[topic]
	for l != nil && l.Len() > 0 {
		w := l.Front().Value.(*waiter)
		ws.unlink(w)
		w.signaled = topic
		w.jobs = w.take
		ws.woken++
		w.ch <- struct{}{}
	}
}

// remove takes w off every list. It returns the topic whose signal w got
// but will not use and how many jobs it was counted on for, or "" if w
// was never signalled; the caller passes such a signal on so that no
// ready job is left with sleeping waiters. It also returns the jobs a
// timer step handed w that w has not taken; a waiter removed while
// claimed is marked gone, and the step gives its jobs back (handOff).
func (ws *waiters) remove(w *waiter) (string, int, []*delayq.Job) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.elems != nil {
		ws.unlink(w)
		return "", 0, nil
	}
	if w.claimed {
		w.gone = true
		return "", 0, nil
	}
	jobs := w.handed
	w.handed = nil
	return w.signaled, w.jobs, jobs
}

// claim takes off their lists the waiters, oldest first per topic, whose
// takes cover the jobs a timer step makes ready (ready, by topic), as
// wake would signal them, and marks them claimed: the step will hand
// them jobs reserved in its own store write (handOff) or signal them.
func (ws *waiters) claim(ready map[string]int) []*waiter {
	topics := make([]string, 0, len(ready))
	for t := range ready {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	ws.mu.Lock()
	defer ws.mu.Unlock()
	var out []*waiter
	for _, t := range topics {
		n := ready[t]
		l := ws.byTopic[t]
		for n > 0 && l != nil && l.Len() > 0 {
			w := l.Front().Value.(*waiter)
			ws.unlink(w)
			w.claimed = true
			n -= w.take
			out = append(out, w)
		}
	}
	return out
}

// handOff ends w's claim: it hands w jobs (none: w tries the store
// itself) and signals it. It returns jobs when w's reserve has left
// meanwhile, for the caller to give back.
func (ws *waiters) handOff(w *waiter, jobs []*delayq.Job) []*delayq.Job {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	w.claimed = false
	if w.gone {
		return jobs
	}
	w.handed = jobs
	w.signaled, w.jobs = "", 0
	ws.woken++
	w.ch <- struct{}{}
	return nil
}

// takeHanded returns and forgets the jobs handed to w.
func (ws *waiters) takeHanded(w *waiter) []*delayq.Job {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	jobs := w.handed
	w.handed = nil
	return jobs
}

// unlink removes w from its lists; ws.mu must be held.
func (ws *waiters) unlink(w *waiter) {
	for i, t := range w.topics {
		l := ws.byTopic[t]
		l.Remove(w.elems[i])
		if l.Len() == 0 {
			delete(ws.byTopic, t)
		}
	}
	w.elems = nil
}

// count returns how many waiters are parked on topic.
func (ws *waiters) count(topic string) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if l := ws.byTopic[topic]; l != nil {
		return l.Len()
	}
	return 0
}
