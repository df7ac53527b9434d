package engine

import (
	"context"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Purge deletes topic's jobs in state, as an operator's delete does
// (whatever their reservation), a page of up to delayq.MaxBatch jobs per
// store write. It deletes at most as many jobs as the state held when it
// began, so jobs arriving meanwhile cannot keep it going, and returns how
// many it deleted. A state is required: purging a whole topic by mistake
// is too easy otherwise.
func (e *Engine) Purge(ctx context.Context, topic string, state delayq.State) (int, error) {
	if err := delayq.CheckTopic(topic); err != nil {
		return 0, err
	}
	if !state.Valid() {
		return 0, delayq.Invalid(delayq.CodeBadState, "state", "%q is not delayed, ready, reserved or buried (a purge needs one)", state)
	}
	t, err := e.Topic(ctx, topic)
	if err != nil {
		return 0, err
	}
	budget := map[delayq.State]int{
		delayq.StateReady: t.Ready, delayq.StateDelayed: t.Delayed,
		delayq.StateReserved: t.Reserved, delayq.StateBuried: t.Buried,
	}[state]
	deleted := 0
	for deleted < budget {
		page, err := e.st.List(ctx, store.ListParams{Topic: topic, State: state, Limit: min(budget-deleted, delayq.MaxBatch)})
		if err != nil {
			e.recordN("purge", deleted, nil)
			return deleted, e.record("purge", err)
		}
		if len(page.Jobs) == 0 {
			break
		}
		ps := make([]store.DeleteParams, len(page.Jobs))
		for i, j := range page.Jobs {
			ps[i] = store.DeleteParams{Ref: delayq.Ref{ID: j.ID}, Force: true, Now: time.Now()}
		}
		_, errs, err := e.st.DeleteBatch(ctx, ps)
		if err != nil {
			e.recordN("purge", deleted, nil)
			return deleted, e.record("purge", err)
		}
		n := 0
		for _, err := range errs {
			if err == nil {
				n++
			}
		}
		deleted += n
		if n == 0 {
			break // every job of the page went meanwhile; what is left is new
		}
	}
	return deleted, e.recordN("purge", deleted, nil)
}
