package api

// AlarmRequest is the body of PUT /v1/alarms/{name}: where to send
// events, which topics to watch (globs; all when absent), the conditions
// (at least one) and how often to repeat a firing event (never when
// absent).
type AlarmRequest struct {
	URL    string    `json:"url"`
	Topics []string  `json:"topics,omitempty"`
	When   AlarmWhen `json:"when"`
	Repeat *Duration `json:"repeat,omitempty"`
	// Secret, when set, signs every event: X-Delayq-Signature carries
	// sha256=<hex HMAC-SHA256 of "<timestamp>.<body>">, X-Delayq-Timestamp
	// the timestamp (docs/alarms.md). Write-only: answers show SecretMask,
	// and a PUT of SecretMask keeps the stored secret.
	Secret string `json:"secret,omitempty"`
	// Headers are sent with every event (a receiver's API key, a routing
	// header). Hop-by-hop headers, Host, Content-Length, Content-Type and
	// the X-Delayq- headers cannot be set.
	Headers map[string]string `json:"headers,omitempty"`
	// Format is the payload: AlarmFormatDelayq (an AlarmEvent, the
	// default), AlarmFormatAlertmanager (Alertmanager's webhook payload,
	// version 4) or AlarmFormatSlack (a Slack incoming webhook's {"text"}).
	Format string `json:"format,omitempty"`
}

// Alarm payload formats (AlarmRequest.Format).
const (
	AlarmFormatDelayq       = "delayq"
	AlarmFormatAlertmanager = "alertmanager"
	AlarmFormatSlack        = "slack"
)

// SecretMask stands for an alarm's secret in answers: the secret itself
// is never sent back.
const SecretMask = "********"

// Headers of a signed alarm event.
const (
	SignatureHeader = "X-Delayq-Signature" // sha256=<hex>
	TimestampHeader = "X-Delayq-Timestamp" // Unix seconds, signed with the body
)

// AlarmWhen holds an alarm's conditions; each present one is checked per
// topic, and each holds on its own.
type AlarmWhen struct {
	// BuriedOver holds while the topic has more buried jobs than this.
	BuriedOver *int `json:"buried_over,omitempty"`
	// OldestReadyOver holds while the topic's oldest ready job has waited
	// longer than this.
	OldestReadyOver *Duration `json:"oldest_ready_over,omitempty"`
	// LatenessP99Over holds while the 99th percentile of the topic's fire
	// lateness over the last minute is above this.
	LatenessP99Over *Duration `json:"lateness_p99_over,omitempty"`
	// FailuresPerMinOver holds while the topic's TTR expiries, releases
	// and buries over the last minute are more than this.
	FailuresPerMinOver *float64 `json:"failures_per_min_over,omitempty"`
}

// Alarm is an alarm on the wire, with its state: "firing" when any of its
// conditions holds for any topic, else "ok". Conditions lists what the
// last evaluation saw, per topic and condition.
type Alarm struct {
	Name       string            `json:"name"`
	URL        string            `json:"url"`
	Topics     []string          `json:"topics"`
	When       AlarmWhen         `json:"when"`
	Repeat     *Duration         `json:"repeat,omitempty"`
	Secret     string            `json:"secret,omitempty"` // SecretMask when the alarm has one
	Headers    map[string]string `json:"headers,omitempty"`
	Format     string            `json:"format"`
	Created    Time              `json:"created"`
	Updated    Time              `json:"updated"`
	State      string            `json:"state"`
	Conditions []AlarmCondition  `json:"conditions"`
}

// AlarmCondition is one condition of an alarm for one topic. Value and
// Threshold are counts, seconds (durations) or failures per minute.
type AlarmCondition struct {
	Topic     string  `json:"topic"`
	Condition string  `json:"condition"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Firing    bool    `json:"firing"`
	Since     *Time   `json:"since,omitempty"` // when it started to hold, while firing
}

// AlarmsResponse answers GET /v1/alarms.
type AlarmsResponse struct {
	Alarms []Alarm `json:"alarms"`
}

// AlarmEvent is what an alarm POSTs to its URL: State "firing" when a
// condition starts to hold (and again every repeat while it holds),
// "resolved" once when it stops.
type AlarmEvent struct {
	Alarm     string  `json:"alarm"`
	Topic     string  `json:"topic"`
	Condition string  `json:"condition"`
	Value     float64 `json:"value"`
	Threshold float64 `json:"threshold"`
	Since     Time    `json:"since"`
	State     string  `json:"state"`
	At        Time    `json:"at"`
}
