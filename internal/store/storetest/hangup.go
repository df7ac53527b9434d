package storetest

import (
	"context"
	"sync/atomic"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// HangUpGate wraps a store so that, while Armed, a Reserve that got jobs
// holds them until its caller's context ends: a client that hangs up just
// after the store reserved its job, the window real hang-ups hit, made as
// wide as a front end's test needs. It fires once, and tells Reserved
// when it holds a reserved job.
type HangUpGate struct {
	store.Store
	Armed    atomic.Bool
	Reserved chan struct{}
}

// NewHangUpGate wraps st, disarmed.
func NewHangUpGate(st store.Store) *HangUpGate {
	return &HangUpGate{Store: st, Reserved: make(chan struct{}, 1)}
}

// Reserve reserves through the wrapped store and, armed, holds the jobs
// until ctx ends.
func (g *HangUpGate) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	jobs, err := g.Store.Reserve(ctx, p)
	if len(jobs) > 0 && g.Armed.CompareAndSwap(true, false) {
		g.Reserved <- struct{}{}
		<-ctx.Done()
	}
	return jobs, err
}
