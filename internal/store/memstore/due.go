package memstore

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var _ store.DueCounter = (*Store)(nil)

// DueCounts implements store.DueCounter with a scan of every job: the
// reference model reads the contract directly rather than keep an index.
func (s *Store) DueCounts(_ context.Context, topic string, now time.Time, bounds []time.Duration) ([]int, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	counts := make([]int, len(bounds))
	nowMS := now.UnixMilli()
	for _, j := range s.jobs {
		if j.Topic == topic && j.State == delayq.StateDelayed {
			store.CountDue(counts, nowMS, j.Due.UnixMilli(), bounds)
		}
	}
	return counts, nil
}
