package api

// TopicHistory answers GET /v1/topics/{topic}/history: the topic's
// samples of the last hour, oldest first, for the dashboard's charts.
type TopicHistory struct {
	Topic string `json:"topic"`
	// Interval is the seconds between two samples; Span the seconds of
	// history kept.
	Interval float64 `json:"interval"`
	Span     float64 `json:"span"`
	// Sampled is false when the topic has no history: it has had no jobs
	// yet, or MaxTopics other topics are sampled (SampledTopics says
	// how many are).
	Sampled       bool            `json:"sampled"`
	MaxTopics     int             `json:"max_topics"`
	SampledTopics int             `json:"sampled_topics"`
	Samples       []HistorySample `json:"samples"`
}

// HistorySample is one sample of a topic.
type HistorySample struct {
	At       Time `json:"at"`
	Ready    int  `json:"ready"`
	Delayed  int  `json:"delayed"`
	Reserved int  `json:"reserved"`
	Buried   int  `json:"buried"`
	// Fires counts the delayed jobs this instance's timer made ready
	// since the previous sample; FiresPerSec is that over the interval.
	Fires       int     `json:"fires"`
	FiresPerSec float64 `json:"fires_per_sec"`
	// Lateness of those fires, absent when nothing fired.
	Lateness *HistoryLateness `json:"lateness,omitempty"`
}

// HistoryLateness is how late the fires of one interval were, in seconds.
type HistoryLateness struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// DueCounts answers GET /v1/topics/{topic}/due: how many delayed jobs of
// the topic fall due within each bound from At.
type DueCounts struct {
	Topic   string      `json:"topic"`
	At      Time        `json:"at"`
	Buckets []DueBucket `json:"buckets"`
}

// DueBucket is one bound of DueCounts: Within as asked ("1h"), in
// seconds, and the count of delayed jobs due at or before At+Within.
type DueBucket struct {
	Within  string  `json:"within"`
	Seconds float64 `json:"seconds"`
	Count   int     `json:"count"`
}
