package pgstore

import (
	"context"
	"errors"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Tick implements store.Store. Only the instance holding the timer lease
// moves work: the others answer at once with a Next one LeaseCheck
// away, so their timers come back to try for the lease. Correctness
// never rests on the lease: every move locks its row (SKIP LOCKED) and
// rechecks its state.
func (s *Store) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := s.at(p.Now)
	res := &store.TickResult{Ready: map[string]int{}}
	if !s.lease.try(ctx) {
		res.Next = now.Add(s.opt.LeaseCheck)
		return res, nil
	}
	limit := p.Max
	if limit <= 0 {
		limit = defaultTickMax
	}
	var delayed, reserved []*delayq.Job
	var paused map[string]bool
	// A tick commits without waiting for the WAL flush: what a crash
	// loses of it is done again by the next tick (the jobs are still
	// delayed and due, reserved and past their deadline, or expired),
	// and any durable commit after it flushes it too. A tick that hands
	// jobs to waiting reserves (p.Claim) commits durably, as Reserve
	// does: a reservation lost in a crash would let a second consumer
	// hold a job the first one still works on.
	err := s.pipeTx(ctx, "tick", func(b *pgx.Batch) {
		b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
		if p.Claim != nil {
			b.Queue(s.q.tickPaused, now).Query(func(rows pgx.Rows) error {
				var err error
				paused, err = pausedSet(rows)
				return err
			})
		}
		b.Queue(s.q.tickExpire, now, limit).Exec(func(tag pgconn.CommandTag) error {
			res.Expired = int(tag.RowsAffected())
			return nil
		})
		b.Queue(s.q.tickDelayed, now, limit+1).Query(func(rows pgx.Rows) (err error) {
			delayed, err = scanJobs(rows)
			return err
		})
		b.Queue(s.q.tickReserved, now, limit+1).Query(func(rows pgx.Rows) (err error) {
			reserved, err = scanJobs(rows)
			return err
		})
	}, func(b *pgx.Batch) error {
		due := append(delayed, reserved...)
		sort.Slice(due, func(a, b int) bool {
			ta, tb := pendingAt(due[a]), pendingAt(due[b])
			if !ta.Equal(tb) {
				return ta.Before(tb)
			}
			return due[a].Seq < due[b].Seq
		})
		more := len(due) > limit
		if more {
			due = due[:limit]
		}
		before := make([]jobCount, len(due))
		for i, j := range due {
			before[i] = countOf(j)
			promote(j, now, p.Backoff, res)
		}
		// Handing the jobs made ready to this instance's waiting
		// reserves saves each a wake-up and a transaction of its own:
		// the lateness a consumer sees is then the tick's alone.
		res.Taken = store.HandOff(due, func(t string) bool { return paused[t] }, p.Claim, now)
		if taken := store.TakenCount(res.Taken); len(taken) > 0 {
			b.Queue("SET LOCAL synchronous_commit TO DEFAULT")
			for t, n := range taken {
				if res.Ready[t] -= n; res.Ready[t] <= 0 {
					delete(res.Ready, t)
				}
			}
		}
		c := counter{}
		var v saver
		for i, j := range due {
			v.add(j)
			c.move(before[i], j)
		}
		v.queue(b, &s.q)
		c.queue(b, &s.q)
		if more {
			res.Next = now
			return nil
		}
		b.Queue(s.q.tickNext).QueryRow(func(row pgx.Row) error {
			var next *time.Time
			if err := row.Scan(&next); err != nil {
				return err
			}
			if next != nil {
				res.Next = next.UTC()
				if res.Next.Before(now) {
					res.Next = now
				}
			}
			return nil
		})
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.ringTopics(res.Ready)
	for _, js := range res.Taken {
		s.ring(js...)
	}
	if s.promise.stale(now, res.Next) {
		s.publishOnce(ctx, now)
		res.Next = s.promise.keep(now, res.Next)
	}
	return res, nil
}

// pausedSet reads the topics of q.tickPaused.
func pausedSet(rows pgx.Rows) (map[string]bool, error) {
	topics, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(topics) == 0 {
		return nil, err
	}
	set := make(map[string]bool, len(topics))
	for _, t := range topics {
		set[t] = true
	}
	return set, nil
}

// pendingAt is when Tick must act on a delayed or reserved job.
func pendingAt(j *delayq.Job) time.Time {
	if j.State == delayq.StateReserved {
		return j.Deadline
	}
	return j.Due
}

// promote makes one due job ready (or buried, or backed off) and
// records it in res, as memstore does.
func promote(j *delayq.Job, now time.Time, bs map[string]store.Backoff, res *store.TickResult) {
	if j.State == delayq.StateDelayed {
		store.ApplyDue(j)
		res.AddLateness(j.Topic, now.Sub(j.Due))
		res.Ready[j.Topic]++
		return
	}
	deadline := j.Deadline
	backedOff := store.ApplyTimeoutBackoff(j, bs)
	how := delayq.OutcomeTTRExpired
	if j.State == delayq.StateBuried {
		how = delayq.OutcomeBuried
	}
	j.EndAttempt(deadline, how, delayq.ReasonTTRExpired)
	switch {
	case backedOff:
		res.AddBackedOff(j.Topic)
	case j.State == delayq.StateBuried:
		res.AddBuried(j.Topic)
	default:
		res.Ready[j.Topic]++
	}
}

// lease is the timer lease: a session advisory lock held on a connection
// of its own. Postgres lets go of it when that session ends (Close, a
// crash, or TCP keepalives giving up on a dead host), and another
// instance takes it at its next try.
type lease struct {
	s    *Store
	mu   sync.Mutex
	conn *pgx.Conn // guarded by mu
	held bool      // guarded by mu
}

func (l *lease) key() string { return "delayq.timer." + l.s.opt.Schema }

// try returns whether this instance holds the lease, taking it if it is
// free.
func (l *lease) try(ctx context.Context) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held {
		return true
	}
	if l.conn == nil {
		// A connection of the pool's, taken out of it for good: the
		// lock lives as long as this session, which no other use of
		// the pool may share.
		c, err := l.s.pool.Acquire(ctx)
		if err != nil {
			return false
		}
		l.conn = c.Hijack()
	}
	var got bool
	if err := l.conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(hashtext($1))", l.key()).Scan(&got); err != nil {
		l.drop()
		return false
	}
	if got {
		l.held = true
		l.s.log.Info("holding the postgres timer lease", "instance", l.s.opt.InstanceID, "schema", l.s.opt.Schema)
		// The promise of the instance that held the lease before binds
		// this one until it publishes its own.
		l.s.publishOnce(ctx, time.Now())
		// Step at once: the jobs due while nobody held the lease.
		l.s.fan.Send(store.Event{Due: time.Now()})
	}
	return got
}

// isHeld says whether this instance holds the lease now.
func (l *lease) isHeld() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held
}

// drop forgets the lease connection after an error. Requires mu.
func (l *lease) drop() {
	if l.held {
		l.s.log.Warn("lost the postgres timer lease", "instance", l.s.opt.InstanceID)
	}
	if l.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = l.conn.Close(ctx)
		cancel()
	}
	l.conn, l.held = nil, false
}

// run checks the lease connection of a holder, and tries for the lease
// otherwise, every LeaseCheck until ctx is done.
func (l *lease) run(ctx context.Context) {
	t := time.NewTicker(l.s.opt.LeaseCheck)
	defer t.Stop()
	var folded time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.isHeld() && time.Since(folded) >= foldEvery {
			if err := l.s.fold(ctx); err != nil && ctx.Err() == nil {
				l.s.log.Warn("postgres counts fold failed", "err", err)
			}
			folded = time.Now()
		}
		if l.isHeld() {
			l.mu.Lock()
			cctx, cancel := context.WithTimeout(ctx, l.s.opt.LeaseCheck)
			err := l.conn.Ping(cctx)
			cancel()
			if err != nil && !errors.Is(err, context.Canceled) {
				l.drop()
			}
			l.mu.Unlock()
			continue
		}
		l.try(ctx)
	}
}

// release hands the lease back and closes its connection.
func (l *lease) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if l.held {
		_, _ = l.conn.Exec(ctx, "SELECT pg_advisory_unlock(hashtext($1))", l.key())
	}
	_ = l.conn.Close(ctx)
	l.conn, l.held = nil, false
}

// The timer's promise lets the SQL put functions skip their NOTIFY: the
// instance holding the lease publishes the time it will look at the
// jobs table again at the latest (timer_publish in the schema), and a
// put due at or after that time needs no wake-up. Tick keeps the promise
// by publishing a new one before it would sleep past the old, and by
// never sleeping past one it could not raise.
type promise struct {
	at atomic.Int64 // unix ms of the promise in force; 0: none
}

// stale says whether the timer, about to sleep until next (zero: until
// woken), must publish first: it would break the promise in force (one
// ahead, before next), or the promise is past or none while jobs are
// pending (every SQL put then notifies).
func (p *promise) stale(now, next time.Time) bool {
	ms := p.at.Load()
	if ms == 0 || ms <= now.UnixMilli() {
		return !next.IsZero()
	}
	return next.IsZero() || ms < next.UnixMilli()
}

// keep returns next, brought forward to the promise in force when that
// comes first and is still ahead of now.
func (p *promise) keep(now, next time.Time) time.Time {
	ms := p.at.Load()
	if ms == 0 {
		return next
	}
	at := time.UnixMilli(ms)
	if at.After(now) && (next.IsZero() || at.Before(next)) {
		return at
	}
	return next
}

// promiseAhead is how far ahead of now the timer promises to look again
// at the latest, when jobs are due sooner: while they fall due every
// millisecond it publishes every promiseAhead instead of every tick, and
// a SQL put due within it notifies.
const promiseAhead = 50 * time.Millisecond

// publishOnce raises the promise once, to no earlier than now plus
// promiseAhead, and keeps the one in force.
func (s *Store) publishOnce(ctx context.Context, now time.Time) {
	// timer_publish only tries the lock that SQL puts hold shared until
	// they commit, and gives up when one holds it. Under a steady stream
	// of application transactions calling delayq.put some put always
	// holds it, so the promise stayed where it was (none, at start) and
	// every delayed SQL put notified: the notify lock then serialized
	// their commits (pgbench: 3.1x the cost of the application's
	// transaction instead of 1.7x). Taking the lock first, waiting at
	// most publishWait, lets the puts in flight commit and holds new
	// ones back only that long; the function's own try then succeeds
	// (the transaction holds the lock already).
	var at *time.Time
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT set_config('lock_timeout', $1, true)", strconv.Itoa(int(s.publishWait.Milliseconds()))+"ms")
	b.Queue("SELECT pg_advisory_xact_lock(hashtext($1), 1)", channel(s.opt.Schema))
	b.Queue(s.q.publish, now.Add(promiseAhead)).QueryRow(func(row pgx.Row) error { return row.Scan(&at) })
	b.Queue("COMMIT")
	// A failed batch leaves its connection inside the transaction, and the
	// pool closes such a connection on release rather than reuse it.
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		if ctx.Err() == nil {
			s.log.Debug("postgres timer publish failed; the promise in force stays", "err", err)
		}
		return
	}
	if at == nil {
		s.promise.at.Store(0)
	} else {
		s.promise.at.Store(at.UnixMilli())
	}
}

// publishWait bounds how long a publish waits for the SQL puts in flight
// to commit (and holds back new delayed SQL puts): a few of their
// commits. Past it the promise in force stays and the timer keeps it by
// waking no later than it.
const publishWait = 20 * time.Millisecond
