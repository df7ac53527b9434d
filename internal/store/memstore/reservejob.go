package memstore

import (
	"context"
	"fmt"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var _ store.JobReserver = (*Store)(nil)

// ReserveJob reserves the job p.Ref names if it is ready, delayed or
// buried (beanstalkd reserve-job).
func (s *Store) ReserveJob(_ context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j, err := s.find(p.Ref)
	if err != nil {
		return nil, err
	}
	if j.State == delayq.StateReserved {
		return nil, fmt.Errorf("memstore: reserve job %s: already reserved: %w", p.Ref, delayq.ErrState)
	}
	store.Reserve(j, s.now(p.Now))
	return j.Clone(), nil
}
