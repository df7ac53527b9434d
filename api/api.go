// Package api holds the wire types of delayq's HTTP/JSON API, version 1, and
// of the original {"command": ...} protocol, plus the table that maps error
// codes to the delayq sentinels. The server (internal/httpapi) and the Go
// SDK (package client) both use it, so the two cannot drift apart.
//
// It imports only the standard library and the root package delayq.
package api

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// TimeLayout is how every time is written: RFC 3339 with milliseconds.
const TimeLayout = "2006-01-02T15:04:05.000Z07:00"

// Duration is a duration on the wire: a duration string ("30s",
// "1500ms", "7d"; see delayq.ParseDuration) or a number of seconds (30,
// 1.5).
type Duration time.Duration

// UnmarshalJSON accepts a duration string or a number of seconds. A number
// too large for a duration (about 292 years) fails with a
// *json.UnmarshalTypeError of type Duration, so the decoder names the
// field and the server can say "too large" rather than wrap around.
func (d *Duration) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := delayq.ParseDuration(s)
		if err != nil {
			return fmt.Errorf("%q is not a duration (use \"30s\", \"1500ms\", \"7d\" or a number of seconds)", s)
		}
		*d = Duration(v)
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		return fmt.Errorf("%s is not a duration (use \"30s\", \"1500ms\", \"7d\" or a number of seconds)", b)
	}
	// Past ±292 years time.Duration overflows; refuse rather than wrap
	// (2^63 ns itself rounds into range as a float64, so compare ≥).
	ns := f * float64(time.Second)
	if ns >= 1<<63 || ns < -(1<<63) {
		return &json.UnmarshalTypeError{Value: "number " + string(b), Type: reflect.TypeFor[Duration]()}
	}
	*d = Duration(ns)
	return nil
}

// MarshalJSON writes the duration as a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// Time is a time on the wire: RFC 3339, written with milliseconds.
type Time struct{ time.Time }

// MarshalJSON writes RFC 3339 with milliseconds, in UTC, rounded up to
// the millisecond: a due time sent by a client must never become earlier
// than asked (server times are whole milliseconds already).
func (t Time) MarshalJSON() ([]byte, error) {
	return []byte(`"` + delayq.CeilMilli(t.Time).UTC().Format(TimeLayout) + `"`), nil
}

// UnmarshalJSON reads RFC 3339 (any sub-second precision).
func (t *Time) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a time must be an RFC 3339 string")
	}
	v, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not an RFC 3339 time", s)
	}
	t.Time = v
	return nil
}

// PutRequest is the body of POST /v1/topics/{topic}/jobs and one element of
// a batch. Body or BodyBase64, Delay or At; absent fields take defaults
// (delay 0, ttr 60 s, priority 1024, max_attempts 0 = unlimited).
type PutRequest struct {
	ID          string    `json:"id,omitempty"`
	Body        *string   `json:"body,omitempty"`
	BodyBase64  *string   `json:"body_base64,omitempty"`
	Delay       *Duration `json:"delay,omitempty"`
	At          *Time     `json:"at,omitempty"`
	TTR         *Duration `json:"ttr,omitempty"`
	Priority    *uint32   `json:"priority,omitempty"`
	MaxAttempts *int      `json:"max_attempts,omitempty"`
}

// PutResponse answers a put (201).
type PutResponse struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
}

// BatchRequest is the body of POST /v1/topics/{topic}/jobs/batch.
type BatchRequest struct {
	Jobs []PutRequest `json:"jobs"`
}

// BatchResponse answers a batch put (201), in request order.
type BatchResponse struct {
	Jobs []PutResponse `json:"jobs"`
}

// ReserveRequest is the body of POST /v1/reserve.
type ReserveRequest struct {
	Topics []string  `json:"topics"`
	N      int       `json:"n,omitempty"`    // default 1, at most 1000
	Wait   *Duration `json:"wait,omitempty"` // default 0, at most the server's max wait
}

// JobsResponse answers reserve and list: {"jobs": [...]}. Next is the
// cursor of the next page of a list ("" when done).
type JobsResponse struct {
	Jobs []Job  `json:"jobs"`
	Next string `json:"next,omitempty"`
}

// Job is a job on the wire. Body is set when the body is valid UTF-8,
// BodyBase64 otherwise. Reservation and Deadline are set on reserved jobs.
type Job struct {
	ID          string  `json:"id"`
	Seq         uint64  `json:"seq"`
	Topic       string  `json:"topic"`
	State       string  `json:"state"`
	Body        *string `json:"body,omitempty"`
	BodyBase64  *string `json:"body_base64,omitempty"`
	Priority    uint32  `json:"priority"`
	TTR         float64 `json:"ttr"` // seconds
	MaxAttempts int     `json:"max_attempts"`
	Attempts    int     `json:"attempts"`
	Due         Time    `json:"due"`
	Created     Time    `json:"created"`
	Reservation string  `json:"reservation,omitempty"`
	Deadline    *Time   `json:"deadline,omitempty"`

	// Counters of the job's life, and why and when it last failed (a
	// release, a bury, or "ttr expired"); absent while it never failed.
	Timeouts   int    `json:"timeouts"`
	Releases   int    `json:"releases"`
	Buries     int    `json:"buries"`
	Kicks      int    `json:"kicks"`
	LastReason string `json:"last_reason,omitempty"`
	LastFailed *Time  `json:"last_failed,omitempty"`

	// History is the job's most recent attempts (at most 20), oldest
	// first; absent while it was never reserved.
	History []Attempt `json:"history,omitempty"`
	// EndedAt is when a retained job (state finished, deleted or failed)
	// ended; absent for a live job.
	EndedAt *Time `json:"ended_at,omitempty"`
}

// Attempt is one reservation of a job and how it ended.
type Attempt struct {
	// Attempt is the job's attempts count this reservation made (1 for
	// the first; a give-back costs none, so the next one has the same).
	Attempt    int    `json:"attempt"`
	ReservedAt Time   `json:"reserved_at"`
	By         string `json:"by"` // the principal, or the connection without one
	// EndedAt, Outcome and Reason are absent while the attempt runs.
	// Outcome is finished, released, ttr_expired, buried, gave_back or
	// deleted; Reason is the consumer's (release, bury) or "ttr expired".
	EndedAt *Time  `json:"ended_at,omitempty"`
	Outcome string `json:"outcome,omitempty"`
	Reason  string `json:"reason,omitempty"`
}

// UpdateRequest is the body of PATCH /v1/jobs/{id}; absent fields are kept.
type UpdateRequest struct {
	Delay      *Duration `json:"delay,omitempty"`
	At         *Time     `json:"at,omitempty"`
	Body       *string   `json:"body,omitempty"`
	BodyBase64 *string   `json:"body_base64,omitempty"`
	Priority   *uint32   `json:"priority,omitempty"`
}

// ActionRequest is the body of finish, touch and bury.
type ActionRequest struct {
	Reservation string  `json:"reservation"`
	Priority    *uint32 `json:"priority,omitempty"` // bury only
	Reason      string  `json:"reason,omitempty"`   // bury only: kept as the job's last_reason
}

// ReleaseRequest is the body of POST /v1/jobs/{id}/release.
type ReleaseRequest struct {
	Reservation string    `json:"reservation"`
	Delay       *Duration `json:"delay,omitempty"`
	Priority    *uint32   `json:"priority,omitempty"`
	Reason      string    `json:"reason,omitempty"` // kept as the job's last_reason
}

// KickRequest is the body of POST /v1/topics/{topic}/kick. State is what
// to kick: "buried" (also when empty) retries failed jobs, "delayed" fires
// jobs due later at once.
type KickRequest struct {
	N     int    `json:"n"`
	State string `json:"state,omitempty"`
}

// KickResponse answers a topic kick. State says which kind of jobs were
// kicked: "buried" or "delayed".
type KickResponse struct {
	Kicked int    `json:"kicked"`
	State  string `json:"state,omitempty"`
}

// FinishRef names one reserved job of a batch finish.
type FinishRef struct {
	ID          string `json:"id"`
	Reservation string `json:"reservation"`
}

// FinishBatchRequest is the body of POST /v1/jobs/finish: up to 1,000
// reserved jobs to finish in one durable write.
type FinishBatchRequest struct {
	Jobs []FinishRef `json:"jobs"`
}

// FinishResult is the outcome of one entry of a batch finish: OK, or the
// error that entry alone met (a stale reservation, an unknown id).
type FinishResult struct {
	ID    string     `json:"id"`
	OK    bool       `json:"ok,omitempty"`
	Error *ErrorBody `json:"error,omitempty"`
}

// FinishBatchResponse answers a batch finish (200), one result per entry
// in request order.
type FinishBatchResponse struct {
	Results []FinishResult `json:"results"`
}

// Topic is a topic's stats on the wire.
type Topic struct {
	Name           string  `json:"name"`
	Delayed        int     `json:"delayed"`
	Ready          int     `json:"ready"`
	Reserved       int     `json:"reserved"`
	Buried         int     `json:"buried"`
	Paused         bool    `json:"paused"`
	OldestReadyAge float64 `json:"oldest_ready_age"` // seconds; 0 when nothing is ready
}

// TopicsResponse answers GET /v1/topics.
type TopicsResponse struct {
	Topics []Topic `json:"topics"`
}

// Instance is one live delayq instance in GET /v1/cluster.
type Instance struct {
	URL       string   `json:"url"`
	Protocols []string `json:"protocols,omitempty"`
	Buckets   []int    `json:"buckets,omitempty"`
	Since     *Time    `json:"since,omitempty"`
}

// ClusterResponse answers GET /v1/cluster.
type ClusterResponse struct {
	Instances []Instance `json:"instances"`
}

// ErrorBody is the inner object of every error answer.
type ErrorBody struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// State is, with code exists, the state of the job that has the id:
	// live (delayed, ready, reserved, buried) or retained (finished,
	// deleted, failed), so a producer retrying a put learns its job is
	// there or done.
	State string `json:"state,omitempty"`
}

// ErrorResponse is every error answer: {"error":{"code","message"}}.
type ErrorResponse struct {
	Error ErrorBody `json:"error"`
}

// CommandRequest is a request of the original protocol (POST / and POST
// /v1/command). Delay, TTR and Timeout are seconds; Body is any JSON value
// (a non-string is stored as its JSON text).
type CommandRequest struct {
	Command string          `json:"command"`
	Topic   string          `json:"topic,omitempty"`
	ID      string          `json:"id,omitempty"`
	Delay   *float64        `json:"delay,omitempty"`
	TTR     *float64        `json:"TTR,omitempty"`
	Body    json.RawMessage `json:"body,omitempty"`
	Timeout *float64        `json:"timeout,omitempty"`
}

// CommandResponse is every answer of the original protocol.
type CommandResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error"`
	ID      string `json:"id"`
	Value   string `json:"value"`
	// State is, when an add failed because the id is taken, the state
	// of the job that has it (see ErrorBody.State).
	State string `json:"state,omitempty"`
}
