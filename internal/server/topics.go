package server

import (
	"context"
	"time"

	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/store"
)

// forgetEvery is how often the server drops the per-topic state of the
// topics that are gone.
const forgetEvery = 10 * time.Second

// forgetHold is how long a gone topic's counters stay after its last
// count, so that their readers see them: the chart history samples every
// 10 s, and the alarms count failures over the last minute at each
// evaluation.
func (s *Server) forgetHold() time.Duration {
	return time.Minute + 2*max(s.cfg.AlarmInterval, history.DefaultInterval)
}

// runForget drops the state of gone topics every forgetEvery until ctx
// ends. A failed round is logged when a streak of failures begins and
// retried at the next.
func (s *Server) runForget(ctx context.Context) error {
	t := time.NewTicker(forgetEvery)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case now := <-t.C:
			err := s.forgetTopics(ctx, now)
			if err != nil && !failing && ctx.Err() == nil {
				s.log.Warn("forgetting the state of gone topics failed; retried every 10 s", "err", err)
			}
			failing = err != nil
		}
	}
}

// forgetTopics drops what the server keeps per topic beside the store
// for every topic that is gone: no live jobs, no pause, no policy, no
// reserve waiting on it, and (for the metrics) no count for forgetHold.
// That is the metrics' per-topic counters and label values, and so the
// copies the chart history and the alarms take of them, and the
// beanstalkd front end's tubes. Without it they kept every topic ever
// named: 180,000 topics given one job each took a server from 40 to 784
// MiB for good (issue 28).
func (s *Server) forgetTopics(ctx context.Context, now time.Time) error {
	stats, err := s.eng.Topics(ctx)
	if err != nil {
		return err
	}
	live := make(map[string]bool, len(stats))
	for _, t := range stats {
		if t.Total() > 0 || t.PausedUntil.After(now) {
			live[t.Name] = true
		}
	}
	if ds, ok := s.st.(store.DocStore); ok {
		pols, err := ds.ListDocs(ctx, store.KindPolicy)
		if err != nil {
			return err
		}
		for _, d := range pols {
			live[d.Name] = true
		}
	}
	s.eng.Metrics().Forget(now, s.forgetHold(), func(topic string) bool {
		return live[topic] || s.eng.Waiting(topic) > 0
	})
	if s.beanstalk != nil {
		if _, err := s.beanstalk.ForgetTubes(ctx); err != nil {
			return err
		}
	}
	return nil
}
