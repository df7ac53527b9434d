package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Instances wake each other through one pub/sub channel, P:events: a put,
// release or kick that makes jobs ready publishes the topic and count (the
// engines wake their long-poll waiters for it), and one that makes an
// earlier due time or deadline publishes that time (the engines' timers
// step). Each instance holds one subscription, whatever the number of
// waiting consumers, and fans events out in-process. An instance ignores
// its own events: its engine already knows.
//
// Pub/sub is best effort: an event lost while an instance reconnects costs
// latency, never a job. After a reconnect the instance tells its engine to
// step at once.

// event is one wake-up. Its wire form is "instance topic count due" with
// "-" for no topic (a topic never starts with '-').
type event struct {
	topic string
	count int
	due   int64 // unix ms; 0 for none
}

func (e event) toStore() store.Event {
	return store.Event{Topic: e.topic, Count: e.count, Due: fromMS(e.due)}
}

// publish tells the other instances; errors are ignored (best effort).
func (s *Store) publish(ctx context.Context, e event) {
	topic := e.topic
	if topic == "" {
		topic = "-"
	}
	msg := fmt.Sprintf("%s %s %d %d", s.opt.InstanceID, topic, e.count, e.due)
	s.c.Do(ctx, s.c.B().Publish().Channel(s.k.events()).Message(msg).Build())
}

// publishPut announces the jobs of a put: ready counts per topic and the
// earliest delayed due.
func (s *Store) publishPut(ctx context.Context, jobs []*delayq.Job) {
	ready := map[string]int{}
	var due int64
	for _, j := range jobs {
		if j.State == delayq.StateReady {
			ready[j.Topic]++
		} else if d := ms(j.Due); due == 0 || d < due {
			due = d
		}
	}
	for t, n := range ready {
		s.publish(ctx, event{topic: t, count: n})
	}
	if due != 0 {
		s.publish(ctx, event{due: due})
	}
}

func parseEvent(msg string) (self string, e event, ok bool) {
	f := strings.Fields(msg)
	if len(f) != 4 {
		return "", e, false
	}
	if f[1] != "-" {
		e.topic = f[1]
	}
	e.count, _ = strconv.Atoi(f[2])
	e.due, _ = strconv.ParseInt(f[3], 10, 64)
	return f[0], e, true
}

// subscribe runs the one subscription of this instance until ctx is done,
// reconnecting after failures.
func (s *Store) subscribe(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		hooked := rueidis.WithOnSubscriptionHook(ctx, func(sub rueidis.PubSubSubscription) {
			s.fan.setSubscribed(sub.Kind == "subscribe")
		})
		err := s.c.Receive(hooked, s.c.B().Subscribe().Channel(s.k.events()).Build(), s.onMessage)
		s.fan.setSubscribed(false)
		if ctx.Err() != nil {
			return
		}
		if time.Since(start) > 5*time.Second {
			backoff = 100 * time.Millisecond
		}
		s.log.Warn("redisstore: event subscription lost; reconnecting", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 2*time.Second)
		// Events may have been missed: let the timer step now.
		s.fan.send(dueNow().toStore())
	}
}

func (s *Store) onMessage(m rueidis.PubSubMessage) {
	self, e, ok := parseEvent(m.Message)
	if !ok || self == s.opt.InstanceID {
		return
	}
	s.fan.send(e.toStore())
}

// Listening reports whether events published by other instances reach
// this instance's Notify readers now: Redis has confirmed the subscription
// and a reader is registered. Pub/sub keeps no backlog, so an event sent
// before then is never heard; tests wait for this instead of sleeping.
func (s *Store) Listening() bool { return s.fan.listening() }

// Notify implements store.Notifier.
func (s *Store) Notify(ctx context.Context) (<-chan store.Event, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	ch := s.fan.add()
	context.AfterFunc(ctx, func() { s.fan.remove(ch) })
	return ch, nil
}

// fanout hands events to every Notify channel without blocking: a full
// channel drops the event (its reader is behind and will catch up on the
// next one; the engine's waiters also recheck on their own).
type fanout struct {
	mu         sync.Mutex
	subs       map[chan store.Event]bool // guarded by mu
	closed     bool                      // guarded by mu
	subscribed bool                      // guarded by mu: Redis confirmed the subscription
}

func newFanout() *fanout { return &fanout{subs: map[chan store.Event]bool{}} }

func (f *fanout) add() chan store.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan store.Event, 4096)
	if f.closed {
		close(ch)
		return ch
	}
	f.subs[ch] = true
	return ch
}

func (f *fanout) setSubscribed(on bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subscribed = on
}

// own is "1" while Redis has confirmed this instance's subscription,
// else "0": how many of the event channel's subscribers are this
// instance (listenedLua).
func (f *fanout) own() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subscribed {
		return "1"
	}
	return "0"
}

func (f *fanout) listening() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.subscribed && len(f.subs) > 0
}

func (f *fanout) remove(ch chan store.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs[ch] {
		delete(f.subs, ch)
		close(ch)
	}
}

func (f *fanout) send(e store.Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

func (f *fanout) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		close(ch)
	}
	f.subs = map[chan store.Event]bool{}
	f.closed = true
}
