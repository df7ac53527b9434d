package metrics

import dto "github.com/prometheus/client_model/go"

// TimeoutsTotal is how many TTR expiries this instance's timer has made
// (delayq_ttr_expired_total), for beanstalkd's stats job-timeouts, so both
// report one count. Over Redis each instance counts the expiries of the
// timer buckets it holds; Prometheus sums them across instances.
func (m *Metrics) TimeoutsTotal() uint64 {
	var pb dto.Metric
	if err := m.timeouts.Write(&pb); err != nil {
		return 0
	}
	return uint64(pb.GetCounter().GetValue())
}
