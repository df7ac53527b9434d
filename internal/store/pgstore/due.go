package pgstore

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// DueCounts implements store.DueCounter: the topic's delayed due times
// up to the largest bound, read in due order from the jobs_topic_due
// index.
func (s *Store) DueCounts(ctx context.Context, topic string, now time.Time, bounds []time.Duration) ([]int, error) {
	counts := make([]int, len(bounds))
	if err := s.check(); err != nil {
		return nil, err
	}
	if len(bounds) == 0 {
		return counts, nil
	}
	var top time.Duration
	for _, b := range bounds {
		top = max(top, b)
	}
	nowMS := delayq.TruncMilli(now).UnixMilli()
	rows, err := s.pool.Query(ctx, s.q.dueCounts, topic, time.UnixMilli(nowMS).Add(top).UTC())
	if err != nil {
		return nil, s.fail("due counts", err)
	}
	defer rows.Close()
	for rows.Next() {
		var due time.Time
		if err := rows.Scan(&due); err != nil {
			return nil, s.fail("due counts", err)
		}
		store.CountDue(counts, nowMS, due.UnixMilli(), bounds)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("due counts", err)
	}
	return counts, nil
}
