package pgstore

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"

	"github.com/delayq/delayq/internal/store"
)

// Instances learn of each other's changes, and of puts made in
// applications' transactions, through one NOTIFY channel per schema:
// the SQL put functions notify at commit when a server must act, and
// the instances ring a bell after their own commits (below). Each instance holds one
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
	return s.fan.Subscribe(ctx), nil
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
	// Anything may have changed while no connection listened: step the
	// timer, and wake the waiters of every topic with ready jobs.
	s.fan.Send(store.Event{Due: time.Now()})
	if topics, err := s.readyTopics(ctx); err == nil {
		for _, t := range topics {
			s.fan.Send(store.Event{Topic: t})
		}
	}
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		if s.ownPID(n.PID) {
			continue
		}
		if e, ok := parseEvent(n.Payload); ok {
			s.fan.Send(e)
		}
	}
}

// parseEvent reads the payloads of the SQL put and the bell: "r <count> <topic>" and
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

// The instances' own writes tell the others through a bell: after a
// commit, ring records what the others may need to hear (topics that got
// ready jobs, the earliest new due time or deadline), and one goroutine
// sends it as NOTIFY, many writes' worth per transaction. A NOTIFY in the
// write's own transaction would hold Postgres's database-wide notify
// lock through that transaction's WAL flush, one committing writer at a
// time; the bell's transactions commit without waiting for the flush
// (synchronous_commit off: a lost wake-up costs latency, never a job).
type bell struct {
	mu     sync.Mutex
	topics map[string]int // ready jobs per topic since the last send; guarded by mu
	due    time.Time      // earliest due time or deadline since the last send; guarded by mu
	sig    chan struct{}
}

func newBell() *bell { return &bell{topics: map[string]int{}, sig: make(chan struct{}, 1)} }

// ring records what jobs, just committed in their new states, tell the
// other instances. The timer's due times are left out while this
// instance holds the timer lease: its own engine already knows.
func (s *Store) ring(jobs ...*delayq.Job) {
	if s.alone.Load() {
		return
	}
	timer := s.lease.isHeld()
	b := s.bell
	b.mu.Lock()
	rung := false
	for _, j := range jobs {
		var at time.Time
		switch j.State {
		case delayq.StateReady:
			b.topics[j.Topic]++
			rung = true
			continue
		case delayq.StateDelayed:
			at = j.Due
		case delayq.StateReserved:
			at = j.Deadline
		default:
			continue
		}
		if !timer && (b.due.IsZero() || at.Before(b.due)) {
			b.due, rung = at, true
		}
	}
	b.mu.Unlock()
	if rung {
		select {
		case b.sig <- struct{}{}:
		default:
		}
	}
}

// ringTopics records ready jobs per topic, as a Tick reports them.
func (s *Store) ringTopics(ready map[string]int) {
	if len(ready) == 0 || s.alone.Load() {
		return
	}
	b := s.bell
	b.mu.Lock()
	for t, n := range ready {
		b.topics[t] += n
	}
	b.mu.Unlock()
	select {
	case b.sig <- struct{}{}:
	default:
	}
}

// chime sends what was rung until ctx is done.
func (s *Store) chime(ctx context.Context) {
	b := s.bell
	ch := channel(s.opt.Schema)
	for {
		select {
		case <-ctx.Done():
			return
		case <-b.sig:
		}
		b.mu.Lock()
		topics, due := b.topics, b.due
		b.topics, b.due = map[string]int{}, time.Time{}
		b.mu.Unlock()
		batch := &pgx.Batch{}
		batch.Queue("SELECT set_config('synchronous_commit', 'off', true)")
		for t, n := range topics {
			batch.Queue("SELECT pg_notify($1, $2)", ch, "r "+strconv.Itoa(n)+" "+t)
		}
		if !due.IsZero() {
			batch.Queue("SELECT pg_notify($1, $2)", ch, "d "+strconv.FormatInt(due.UnixMilli(), 10))
		}
		if batch.Len() == 1 {
			continue
		}
		if err := s.pool.SendBatch(ctx, batch).Close(); err != nil && ctx.Err() == nil {
			// A wake-up only: the others' timers and consumers catch up
			// at their next step.
			s.log.Debug("postgres notify failed", "err", err)
		}
	}
}
