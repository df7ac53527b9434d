package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
)

// heartbeat writes this instance's row: its address, protocols, and
// whether it holds the timer lease.
//
// It also learns which other instances are alive: while there are none,
// the bell does not ring (notify.go). When one appears, the wake-ups it
// may have missed are rung again: every topic with ready jobs.
func (s *Store) heartbeat(ctx context.Context) error {
	url, protocols := s.advertised()
	rows, err := s.pool.Query(ctx, s.q.heartbeat, s.opt.InstanceID, url, strings.Join(protocols, ","), s.since, s.lease.isHeld(),
		s.aliveWithin().String())
	var others []string
	if err == nil {
		others, err = pgx.CollectRows(rows, pgx.RowTo[string])
	}
	s.reach.set(err)
	if err != nil {
		return s.fail("heartbeat", err)
	}
	if s.meet(others) {
		s.ringReady(ctx)
	}
	return nil
}

// aliveWithin is how recent an instance's heartbeat must be for it to
// count as alive.
func (s *Store) aliveWithin() time.Duration { return 3*s.opt.LeaseCheck + 2*time.Second }

// meet records the other instances alive and says whether one is new.
func (s *Store) meet(others []string) bool {
	s.peersMu.Lock()
	defer s.peersMu.Unlock()
	met := false
	now := map[string]bool{}
	for _, id := range others {
		now[id] = true
		if !s.peers[id] {
			met = true
		}
	}
	s.peers = now
	s.alone.Store(len(now) == 0)
	return met
}

// readyTopics lists the topics that have ready jobs.
func (s *Store) readyTopics(ctx context.Context) ([]string, error) {
	rows, err := s.pool.Query(ctx, s.q.readyTopics)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// ringReady rings every topic that has ready jobs.
func (s *Store) ringReady(ctx context.Context) {
	topics, err := s.readyTopics(ctx)
	if err != nil {
		return
	}
	ready := make(map[string]int, len(topics))
	for _, t := range topics {
		ready[t] = 1
	}
	s.ringTopics(ready)
}

// heartbeats renews the row every LeaseCheck until ctx is done.
func (s *Store) heartbeats(ctx context.Context) {
	t := time.NewTicker(s.opt.LeaseCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = s.heartbeat(ctx)
		}
	}
}

// Instances implements store.Cluster: the instances whose heartbeat is
// recent (within 3 LeaseChecks plus 2 s), sorted by URL; the one holding
// the timer lease lists bucket 0 (the whole timer).
func (s *Store) Instances(ctx context.Context) ([]delayq.Instance, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.instances, s.aliveWithin().String())
	if err != nil {
		return nil, s.fail("cluster", err)
	}
	defer rows.Close()
	out := []delayq.Instance{}
	for rows.Next() {
		var id, url, protocols string
		var since time.Time
		var timer bool
		if err := rows.Scan(&id, &url, &protocols, &since, &timer); err != nil {
			return nil, s.fail("cluster", err)
		}
		in := delayq.Instance{URL: url, Since: since.UTC()}
		if protocols != "" {
			in.Protocols = strings.Split(protocols, ",")
		}
		if timer {
			in.Buckets = []int{0}
		}
		out = append(out, in)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("cluster", err)
	}
	return out, nil
}
