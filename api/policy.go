package api

// PolicyRequest is the body of PUT /v1/topics/{topic}/policy. Absent
// fields set nothing; at least one must be present.
type PolicyRequest struct {
	// TTR is the ttr of jobs put without one.
	TTR *Duration `json:"ttr,omitempty"`
	// MaxAttempts is the max_attempts of jobs put without one (≥ 1).
	MaxAttempts *int `json:"max_attempts,omitempty"`
	// Backoff delays jobs released without a delay and jobs whose TTR
	// ran out.
	Backoff *BackoffRequest `json:"backoff,omitempty"`
	// MaxJobs bounds the topic's live jobs (≥ 1); puts beyond it are
	// refused with topic_full (429).
	MaxJobs *int `json:"max_jobs,omitempty"`
}

// BackoffRequest is a policy's backoff: attempt n waits
// initial·factor^(n-1), at most max, spread by ±jitter of itself. Initial
// is needed; max defaults to 1h (or initial if longer), factor to 2,
// jitter to 0.
type BackoffRequest struct {
	Initial *Duration `json:"initial,omitempty"`
	Max     *Duration `json:"max,omitempty"`
	Factor  *float64  `json:"factor,omitempty"`
	Jitter  *float64  `json:"jitter,omitempty"`
}

// Policy answers GET and PUT /v1/topics/{topic}/policy: the topic's
// policy with the backoff's defaults filled in.
type Policy struct {
	Topic       string    `json:"topic"`
	TTR         *Duration `json:"ttr,omitempty"`
	MaxAttempts int       `json:"max_attempts,omitempty"`
	Backoff     *Backoff  `json:"backoff,omitempty"`
	MaxJobs     int       `json:"max_jobs,omitempty"`
}

// Backoff is a policy's backoff as the server holds it.
type Backoff struct {
	Initial Duration `json:"initial"`
	Max     Duration `json:"max"`
	Factor  float64  `json:"factor"`
	Jitter  float64  `json:"jitter"`
}

// PoliciesResponse answers GET /v1/policies: every topic's policy, by
// topic.
type PoliciesResponse struct {
	Policies []Policy `json:"policies"`
}
