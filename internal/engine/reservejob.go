package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// ReserveJob reserves one chosen job that is ready, delayed or buried
// (beanstalkd's reserve-job). Stores that are not a store.JobReserver
// answer ErrState.
func (e *Engine) ReserveJob(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	j, err := e.reserveJob(ctx, ref)
	return j, e.record("reserve", err)
}

func (e *Engine) reserveJob(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if e.Draining() {
		return nil, delayq.ErrDraining
	}
	jr, ok := e.st.(store.JobReserver)
	if !ok {
		return nil, fmt.Errorf("engine: this store cannot reserve a job by id: %w", delayq.ErrState)
	}
	j, err := jr.ReserveJob(ctx, store.ReserveJobParams{Ref: ref, Now: delayq.TruncMilli(time.Now())})
	if err != nil {
		return nil, err
	}
	e.announce(j)
	return j, nil
}
