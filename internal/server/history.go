package server

import "github.com/delayq/delayq/internal/history"

// jobCounts gives the chart history each topic's finishes and failed
// attempts on this instance, as the metrics count them (failures: TTR
// expiries, releases and buries, the alarms' count too).
func (s *Server) jobCounts() map[string]history.Counts {
	return history.MetricsCounts(s.eng.Metrics())
}
