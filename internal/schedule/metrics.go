package schedule

import "github.com/prometheus/client_golang/prometheus"

// Tick outcomes counted by delayq_schedule_ticks_total.
const (
	outcomeFired    = "fired"      // this instance claimed the tick and put its job
	outcomeSkipped  = "skipped"    // an outage's missed ticks were skipped by the policy (once per outage, not per tick)
	outcomeTakeover = "taken_over" // another scheduler's claim expired; this one finished it
	outcomeFailed   = "put_failed" // the put failed; the claim waits for its lease
)

// counters are the scheduler's Prometheus figures. Each instance counts
// what it did; over Redis the sum over instances is one per tick.
type counters struct {
	ticks *prometheus.CounterVec
}

func newCounters(reg prometheus.Registerer) *counters {
	c := &counters{ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "delayq_schedule_ticks_total",
		Help: "Schedule ticks handled by this instance, by outcome: fired, skipped (an outage's missed ticks skipped by the policy; once per outage), taken_over (an expired claim finished), put_failed.",
	}, []string{"outcome"})}
	if reg != nil {
		reg.MustRegister(c.ticks)
	}
	return c
}

func (c *counters) tick(outcome string, n int) { c.ticks.WithLabelValues(outcome).Add(float64(n)) }
