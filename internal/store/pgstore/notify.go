package pgstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq/internal/store"
)

// Instances learn of each other's changes, and of puts made in
// applications' transactions, through one NOTIFY channel per schema,
// sent by the jobs table's trigger at commit. Each instance holds one
// LISTEN connection, whatever the number of waiting consumers, and fans
// events out in-process. It ignores the events of its own pool's
// sessions: its engine already knows. NOTIFY is a wake-up, not a record:
// an event lost while the connection is down costs latency, never a job,
// and after a reconnect the engine is told to step at once.

// Notify implements store.Notifier.
func (s *Store) Notify(ctx context.Context) (<-chan store.Event, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	return s.fan.subscribe(ctx), nil
}

// listen holds the LISTEN connection until ctx is done, reconnecting
// with backoff.
func (s *Store) listen(ctx context.Context) {
	wait := 100 * time.Millisecond
	for ctx.Err() == nil {
		if s.listenOnce(ctx) {
			wait = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// listenOnce listens until the connection fails; it reports whether it
// got as far as listening.
func (s *Store) listenOnce(ctx context.Context) bool {
	conn, err := pgx.ConnectConfig(ctx, s.cfg.ConnConfig.Copy())
	if err != nil {
		return false
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = conn.Close(cctx)
		cancel()
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{channel(s.opt.Schema)}.Sanitize()); err != nil {
		if ctx.Err() == nil {
			s.log.Warn("postgres LISTEN failed (a pooler in transaction mode breaks it; see docs/postgres.md)", "err", err)
		}
		return false
	}
	// Anything may have changed while no connection listened.
	s.fan.send(store.Event{Due: time.Now()})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if s.ownPID(n.PID) {
			continue
		}
		if e, ok := parseEvent(n.Payload); ok {
			s.fan.send(e)
		}
	}
}

// parseEvent reads the trigger's payloads: "r <count> <topic>" and
// "d <unix ms>".
func parseEvent(p string) (store.Event, bool) {
	kind, rest, ok := strings.Cut(p, " ")
	if !ok {
		return store.Event{}, false
	}
	switch kind {
	case "r":
		n, topic, ok := strings.Cut(rest, " ")
		count, err := strconv.Atoi(n)
		if !ok || err != nil || topic == "" {
			return store.Event{}, false
		}
		return store.Event{Topic: topic, Count: count}, true
	case "d":
		ms, err := strconv.ParseInt(rest, 10, 64)
		if err != nil {
			return store.Event{}, false
		}
		return store.Event{Due: time.UnixMilli(ms).UTC()}, true
	}
	return store.Event{}, false
}

// fanout hands every event to every subscriber, never blocking the
// listener: a subscriber whose buffer is full misses the event (a
// wake-up only).
type fanout struct {
	mu     sync.Mutex
	subs   map[chan store.Event]bool // guarded by mu
	closed bool                      // guarded by mu
}

func newFanout() *fanout { return &fanout{subs: map[chan store.Event]bool{}} }

func (f *fanout) subscribe(ctx context.Context) <-chan store.Event {
	ch := make(chan store.Event, 1024)
	f.mu.Lock()
	if f.closed {
		close(ch)
		f.mu.Unlock()
		return ch
	}
	f.subs[ch] = true
	f.mu.Unlock()
	go func() {
		<-ctx.Done()
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.subs[ch] {
			delete(f.subs, ch)
			close(ch)
		}
	}()
	return ch
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
	f.closed = true
	for ch := range f.subs {
		delete(f.subs, ch)
		close(ch)
	}
}
