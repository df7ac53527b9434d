package store

import (
	"context"
	"sync"
)

// Fanout hands every Event to every subscriber without ever blocking the
// sender (a store's listener): a subscriber whose buffer is full misses
// the event. That is safe because an Event is a hint (see Notifier), and
// a listener that stalled on one slow subscriber would delay every
// other instance's wake-ups.
type Fanout struct {
	buf    int
	mu     sync.Mutex
	subs   map[chan Event]bool // guarded by mu
	closed bool                // guarded by mu
}

// NewFanout returns a Fanout whose subscribers get buf events of buffer.
func NewFanout(buf int) *Fanout {
	return &Fanout{buf: buf, subs: map[chan Event]bool{}}
}

// Subscribe returns a channel of every later event; it is closed when ctx
// ends or the Fanout closes, whichever is first.
func (f *Fanout) Subscribe(ctx context.Context) <-chan Event {
	ch := make(chan Event, f.buf)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		close(ch)
		return ch
	}
	f.subs[ch] = true
	context.AfterFunc(ctx, func() { f.remove(ch) })
	return ch
}

func (f *Fanout) remove(ch chan Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.subs[ch] {
		delete(f.subs, ch)
		close(ch)
	}
}

// Subscribers is how many channels are subscribed now.
func (f *Fanout) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Send offers e to every subscriber, dropping it for those that are full.
func (f *Fanout) Send(e Event) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for ch := range f.subs {
		select {
		case ch <- e:
		default:
		}
	}
}

// Close closes every subscriber's channel; later subscribers get a
// closed channel.
func (f *Fanout) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for ch := range f.subs {
		delete(f.subs, ch)
		close(ch)
	}
}
