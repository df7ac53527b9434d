package client

import "time"

// Hooks are optional callbacks on a consumer's jobs, for metrics and
// tracing. They run on the worker's goroutine and should be quick. Nil
// fields are skipped.
type Hooks struct {
	// Start is called before the handler runs.
	Start func(j *Job)
	// Finish is called when the handler succeeded and the job was finished
	// (err nil) or finishing it failed (err not nil).
	Finish func(j *Job, took time.Duration, err error)
	// Failure is called when the handler failed; next says what happened to
	// the job: "release" (retried after delay), "bury" (permanent error or
	// attempts spent) or "lost" (the reservation was no longer ours).
	Failure func(j *Job, took time.Duration, err error, next string, delay time.Duration)
}
