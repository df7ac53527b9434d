package engine

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// ReserveJob reserves one chosen job that is ready, delayed or buried
// (beanstalkd's reserve-job) on behalf of by (see ReserveRequest.By).
func (e *Engine) ReserveJob(ctx context.Context, ref delayq.Ref, by string) (*delayq.Job, error) {
	j, err := e.reserveJob(ctx, ref, by)
	return j, e.record("reserve", err)
}

func (e *Engine) reserveJob(ctx context.Context, ref delayq.Ref, by string) (*delayq.Job, error) {
	if err := checkRef(ref); err != nil {
		return nil, err
	}
	if e.Draining() {
		return nil, delayq.ErrDraining
	}
	j, err := e.st.ReserveJob(ctx, store.ReserveJobParams{Ref: ref, Now: time.Now(), By: by}) // exact: the TTR runs from this instant
	if err != nil {
		return nil, delayq.ForJob(ref, err)
	}
	e.announce(j)
	return j, nil
}
