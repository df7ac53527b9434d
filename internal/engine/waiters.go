package engine

import (
	"container/list"
	"sync"
)

// waiters parks long-polling reserves per topic. One job made ready wakes
// one waiter (no thundering herd): wake pops waiters in arrival order and
// removes each from every topic it waits on.
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
	elems    []*list.Element // guarded by waiters.mu; nil once signalled or removed
	signaled string          // guarded by waiters.mu: the topic that woke it
}

func newWaiters() *waiters {
	return &waiters{byTopic: make(map[string]*list.List)}
}

// add parks a new waiter on topics.
func (ws *waiters) add(topics []string) *waiter {
	w := &waiter{ch: make(chan struct{}, 1), topics: topics}
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

// wake signals up to n waiters of topic, oldest first.
func (ws *waiters) wake(topic string, n int) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	l := ws.byTopic[topic]
	for ; n > 0 && l != nil && l.Len() > 0; n-- {
		w := l.Front().Value.(*waiter)
		ws.unlink(w)
		w.signaled = topic
		ws.woken++
		w.ch <- struct{}{}
	}
}

// remove takes w off every list. It returns the topic whose signal w got
// but will not use, or "" if w was never signalled; the caller passes such
// a signal on so that no ready job is left with sleeping waiters.
func (ws *waiters) remove(w *waiter) string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	if w.elems != nil {
		ws.unlink(w)
		return ""
	}
	return w.signaled
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
