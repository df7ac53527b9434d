package diskstore

import (
	"context"
	"fmt"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var _ store.JobReserver = (*Store)(nil)

// ReserveJob implements store.JobReserver (beanstalkd's reserve-job).
func (s *Store) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	return s.change(ctx, "reserve job", func() (*delayq.Job, *delayq.Job, error) {
		j, err := s.lookup(p.Ref)
		if err != nil {
			return nil, nil, err
		}
		if j.State == delayq.StateReserved {
			return nil, nil, fmt.Errorf("diskstore: reserve job %s: already reserved: %w", p.Ref, delayq.ErrState)
		}
		n := j.Clone()
		store.Reserve(n, s.now(p.Now))
		return j, n, nil
	})
}
