package api

// ScheduleRequest is the body of PUT /v1/schedules/{name}: a periodic job.
// Cron or Every; Body or BodyBase64. Absent fields take defaults (ttr
// 60 s, priority 1024, max_attempts 0, timezone UTC, missed "skip").
type ScheduleRequest struct {
	Topic       string    `json:"topic"`
	Cron        string    `json:"cron,omitempty"`  // cron spec, seconds optional, or @every/@hourly/...
	Every       *Duration `json:"every,omitempty"` // fixed interval, at least 100ms
	Body        *string   `json:"body,omitempty"`
	BodyBase64  *string   `json:"body_base64,omitempty"`
	TTR         *Duration `json:"ttr,omitempty"`
	Priority    *uint32   `json:"priority,omitempty"`
	MaxAttempts *int      `json:"max_attempts,omitempty"`
	Timezone    string    `json:"timezone,omitempty"` // IANA name, e.g. Europe/Berlin
	Missed      string    `json:"missed,omitempty"`   // skip, one or all
}

// Schedule is a schedule on the wire. Cron is the spec it fires by
// ("@every 1m30s" when it was given as every). Next holds its next fire
// times (up to 5); Last is the latest tick fired, absent before the first.
type Schedule struct {
	Name        string  `json:"name"`
	Topic       string  `json:"topic"`
	Cron        string  `json:"cron"`
	Timezone    string  `json:"timezone"`
	Missed      string  `json:"missed"`
	Body        *string `json:"body,omitempty"`
	BodyBase64  *string `json:"body_base64,omitempty"`
	TTR         float64 `json:"ttr"` // seconds
	Priority    uint32  `json:"priority"`
	MaxAttempts int     `json:"max_attempts"`
	Paused      bool    `json:"paused"`
	Created     Time    `json:"created"`
	Updated     Time    `json:"updated"`
	Last        *Time   `json:"last,omitempty"`
	Next        []Time  `json:"next"`
}

// SchedulesResponse answers GET /v1/schedules.
type SchedulesResponse struct {
	Schedules []Schedule `json:"schedules"`
}

// PauseRequest is the body of POST /v1/topics/{topic}/pause: reserves skip
// the topic for For, or until it is resumed when For is absent.
type PauseRequest struct {
	For *Duration `json:"for,omitempty"`
}
