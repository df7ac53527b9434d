package alarm

import "github.com/prometheus/client_golang/prometheus"

// Delivery outcomes counted by delayq_alarm_events_total.
const (
	outcomeSent    = "sent"     // the receiver answered 2xx
	outcomeGivenUp = "given_up" // every retry failed, or shutdown cut it off
	outcomeDropped = "dropped"  // too many events waited for the receiver
)

// counters are the alarms' Prometheus figures: what this instance did
// with the events its state writes won.
type counters struct {
	events *prometheus.CounterVec
}

func newCounters(reg prometheus.Registerer) *counters {
	c := &counters{events: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "delayq_alarm_events_total",
		Help: "Alarm events this instance sent, by outcome: sent, given_up (retries spent or shut down), dropped (too many waiting).",
	}, []string{"outcome"})}
	for _, o := range []string{outcomeSent, outcomeGivenUp, outcomeDropped} {
		c.events.WithLabelValues(o) // export zeros, so an alert on given_up works from the start
	}
	if reg != nil {
		reg.MustRegister(c.events)
	}
	return c
}

func (c *counters) event(outcome string) { c.events.WithLabelValues(outcome).Inc() }
