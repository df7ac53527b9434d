package diskstore

import (
	"context"
	"encoding/binary"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/internal/store"
)

var _ store.DueCounter = (*Store)(nil)

// DueCounts implements store.DueCounter. A topic's delayed jobs have X
// keys in due order, so it walks the keys up to the largest bound and
// reads no record. The iterator is made under the mutex (after the open
// group is handed to Pebble, so it sees every change memory has) and
// walked without it: a long count does not stall the job path.
func (s *Store) DueCounts(ctx context.Context, topic string, now time.Time, bounds []time.Duration) ([]int, error) {
	counts := make([]int, len(bounds))
	if len(bounds) == 0 {
		return counts, nil
	}
	nowMS := now.UnixMilli()
	prefix := stateIndexPrefix(topic, stDelayed)
	limit := nowMS + slices.Max(bounds).Milliseconds()
	// Keys due at or before limit sort before prefix + sortable(limit+1).
	upper := binary.BigEndian.AppendUint64(slices.Clone(prefix), sortable(limit+1))
	var g *group
	err := s.outside(ctx, false, func() error {
		s.mu.Lock()
		it, err := s.iter(&pebble.IterOptions{LowerBound: prefix, UpperBound: upper})
		g = s.tail
		s.mu.Unlock()
		if err != nil {
			return unavailable("due counts", err)
		}
		defer it.Close()
		for ok := it.First(); ok; ok = it.Next() {
			k := it.Key()
			if len(k) < len(prefix)+8 {
				continue
			}
			due := int64(binary.BigEndian.Uint64(k[len(prefix):]) ^ (1 << 63))
			store.CountDue(counts, nowMS, due, bounds)
		}
		if err := it.Error(); err != nil {
			return unavailable("due counts", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	// As every read: show nothing that is not durable yet.
	if err := s.wait(ctx, g); err != nil {
		return nil, err
	}
	return counts, nil
}
