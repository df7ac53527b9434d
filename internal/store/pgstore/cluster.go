package pgstore

import (
	"context"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// heartbeat writes this instance's row: its address, protocols, and
// whether it holds the timer lease.
func (s *Store) heartbeat(ctx context.Context) error {
	url, protocols := s.advertised()
	_, err := s.pool.Exec(ctx, s.q.heartbeat, s.opt.InstanceID, url, strings.Join(protocols, ","), s.since, s.lease.isHeld())
	s.reach.set(err)
	if err != nil {
		return s.fail("heartbeat", err)
	}
	return nil
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
	rows, err := s.pool.Query(ctx, s.q.instances, (3*s.opt.LeaseCheck + 2*time.Second).String())
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
