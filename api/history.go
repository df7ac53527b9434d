package api

// TopicHistory answers GET /v1/topics/{topic}/history: the topic's
// samples over the range asked for (range, default one hour, at most
// seven days), oldest first, for the dashboard's charts. The series live
// in the store: they survive restarts and, over Redis, hold every
// instance's figures.
type TopicHistory struct {
	Topic string `json:"topic"`
	// Interval is the seconds each sample covers (the resolution served:
	// 10 up to a day's range, 60 beyond); Span the seconds of the range.
	Interval float64 `json:"interval"`
	Span     float64 `json:"span"`
	// Resolutions are what the server keeps: buckets of Step seconds,
	// each kept Keep seconds. The longest Keep is the longest range.
	Resolutions []HistoryResolution `json:"resolutions"`
	// Sampled is false when the topic has no history: it has had no jobs
	// yet, or MaxTopics other topics are sampled (SampledTopics says
	// how many are).
	Sampled       bool            `json:"sampled"`
	MaxTopics     int             `json:"max_topics"`
	SampledTopics int             `json:"sampled_topics"`
	Samples       []HistorySample `json:"samples"`
}

// HistoryResolution is one resolution the server keeps the history at.
type HistoryResolution struct {
	Step float64 `json:"step"` // seconds per bucket
	Keep float64 `json:"keep"` // seconds a bucket is kept
}

// HistorySample is one bucket of a topic's history: At is its start,
// and it covers Interval seconds. Buckets no instance wrote (the server
// was down, the topic idle) are left out.
type HistorySample struct {
	At Time `json:"at"`
	// Jobs in each state at the bucket's last sample.
	Ready    int `json:"ready"`
	Delayed  int `json:"delayed"`
	Reserved int `json:"reserved"`
	Buried   int `json:"buried"`
	// Fires counts the delayed jobs the timer made ready in the bucket
	// (every instance's timer); FiresPerSec is that over the interval.
	Fires       int     `json:"fires"`
	FiresPerSec float64 `json:"fires_per_sec"`
	// Finishes counts jobs their consumer finished in the bucket.
	Finishes       int     `json:"finishes"`
	FinishesPerSec float64 `json:"finishes_per_sec"`
	// Failures counts failed attempts in the bucket: releases, buries
	// and TTR expiries (docs/states.md: delayq_releases_total,
	// delayq_ttr_expired_total and delayq_buries_total).
	Failures       int     `json:"failures"`
	FailuresPerSec float64 `json:"failures_per_sec"`
	// Lateness of those fires, absent when nothing fired.
	Lateness *HistoryLateness `json:"lateness,omitempty"`
}

// HistoryLateness is how late the fires of one bucket were, in seconds:
// percentiles from the merged lateness histogram (at most 10% above the
// true value), and the exact maximum.
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
