package server

import (
	"context"

	"golang.org/x/sync/errgroup"

	"github.com/delayq/delayq/internal/schedule"
	"github.com/delayq/delayq/internal/store"
)

// newSchedules returns the periodic jobs' service over the store's
// documents. Every instance runs one: over a
// shared store they race per tick and the store's compare-and-set lets one
// win (package schedule).
func (s *Server) newSchedules() *schedule.Service {
	return schedule.New(store.Schedules(s.st), s.eng, schedule.Config{
		MaxBody:  s.cfg.MaxBody,
		Logger:   s.log.With("component", "schedule"),
		Registry: s.eng.Metrics().Registry,
	})
}

// runSchedules starts the scheduler in g. It stops first on shutdown
// (stopSchedules), before the engine drains, so no tick's put meets a
// draining engine; a tick in flight then is finished first (within
// schedule's tickTimeout), and one its store call could not finish is
// taken over after its lease by another instance or after the restart.
func (s *Server) runSchedules(g *errgroup.Group) {
	if s.sched == nil {
		s.stopSched = func() {}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopSched = func() { cancel(); <-done }
	g.Go(func() error {
		defer close(done)
		return s.sched.Run(ctx)
	})
}
