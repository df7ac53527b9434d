package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/delayq/delayq/internal/alarm"
	"github.com/delayq/delayq/internal/config"
)

// newAlarms returns the alarms' service over the store's documents.
// Every instance runs one; over a shared
// store they share figures and state, and each event is sent by the
// instance whose state write won (package alarm).
func (s *Server) newAlarms() *alarm.Service {
	m := s.eng.Metrics()
	nets, _ := config.ParseNets(s.cfg.WebhookAllowNets) // Validate has checked them
	return alarm.New(s.st, alarm.Sources{
		Topics: s.eng.Topics,
		LatenessP99: func(topic string, since time.Time) (time.Duration, bool) {
			return s.hist.LatenessP99(topic, since)
		},
		Failures: m.ByTopic,
	}, alarm.Config{
		Interval:  s.cfg.AlarmInterval,
		AllowNets: nets,
		Shared:    s.cluster != nil,
		Instance:  instanceName(),
		Logger:    s.log.With("component", "alarm"),
		Registry:  m.Registry,
	})
}

// instanceName is a random name for this instance's alarm figures.
func instanceName() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// runAlarms starts the evaluation loop in g. It stops with the
// scheduler, first on shutdown, and ends its in-flight sends.
func (s *Server) runAlarms(g *errgroup.Group) {
	if s.alarms == nil {
		s.stopAlarms = func() {}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.stopAlarms = func() { cancel(); <-done }
	g.Go(func() error {
		defer close(done)
		return s.alarms.Run(ctx)
	})
}
