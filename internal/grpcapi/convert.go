package grpcapi

import (
	"math"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/internal/engine"
)

// The conversions between the protobuf messages and the engine's types.
// They check only what the engine cannot see once a value is converted: a
// Duration or Timestamp that is not one (nanos out of range or of the
// other sign), and a Duration too large for a time.Duration (about 292
// years), which AsDuration would silently clamp. Every rule of a value
// the engine can see (a negative delay, a ttr under 1 s, an at before
// 1970) is the engine's, so it means the same on every protocol.

// Bounds of a time.Duration in whole seconds and the nanoseconds beyond.
const (
	maxDurSeconds = math.MaxInt64 / int64(time.Second)
	maxDurNanos   = math.MaxInt64 % int64(time.Second)
	minDurSeconds = math.MinInt64 / int64(time.Second)
	minDurNanos   = math.MinInt64 % int64(time.Second)
)

// duration converts d, the request's field named field (code is the
// field's validation code); nil when d is unset.
func duration(d *durationpb.Duration, code, field string) (*time.Duration, error) {
	if d == nil {
		return nil, nil
	}
	if err := d.CheckValid(); err != nil {
		return nil, delayq.Invalid(code, field, "not a valid duration (seconds %d, nanos %d)", d.GetSeconds(), d.GetNanos())
	}
	s, n := d.GetSeconds(), int64(d.GetNanos())
	if s > maxDurSeconds || s == maxDurSeconds && n > maxDurNanos || s < minDurSeconds || s == minDurSeconds && n < minDurNanos {
		return nil, delayq.Invalid(code, field, "%ds is too large (a duration is at most about 292 years)", s)
	}
	v := d.AsDuration()
	return &v, nil
}

// timestamp converts t, the request's field named field; nil when unset.
func timestamp(t *timestamppb.Timestamp, code, field string) (*time.Time, error) {
	if t == nil {
		return nil, nil
	}
	if err := t.CheckValid(); err != nil {
		return nil, delayq.Invalid(code, field, "not a valid time (seconds %d, nanos %d)", t.GetSeconds(), t.GetNanos())
	}
	v := t.AsTime()
	return &v, nil
}

// putFields are the fields of a put, shared by PutRequest and a batch's
// PutJob. Priority and MaxAttempts are nil when unset: then the defaults
// (and the topic's policy) apply.
type putFields struct {
	id          string
	body        []byte
	delay, ttr  *durationpb.Duration
	at          *timestamppb.Timestamp
	priority    *uint32
	maxAttempts *int32
}

func putOf(m *delayqv1.PutRequest) putFields {
	return putFields{m.GetId(), m.GetBody(), m.GetDelay(), m.GetTtr(), m.GetAt(), m.Priority, m.MaxAttempts}
}

func putJobOf(m *delayqv1.PutJob) putFields {
	return putFields{m.GetId(), m.GetBody(), m.GetDelay(), m.GetTtr(), m.GetAt(), m.Priority, m.MaxAttempts}
}

// toPut turns a put of topic into an engine put. It only translates: an
// unset ttr, priority or max_attempts stays nil, and the engine fills the
// default or the topic policy's value, as for every protocol. field
// prefixes the names in its errors ("jobs[3]." in a batch).
func toPut(topic string, p putFields, field string) (engine.PutRequest, error) {
	r := engine.PutRequest{ID: p.id, Topic: topic, Body: p.body, Priority: p.priority}
	if r.Body == nil {
		r.Body = []byte{}
	}
	var err error
	if r.Delay, err = duration(p.delay, delayq.CodeBadDelay, field+"delay"); err != nil {
		return r, err
	}
	if r.At, err = timestamp(p.at, delayq.CodeBadAt, field+"at"); err != nil {
		return r, err
	}
	if r.TTR, err = duration(p.ttr, delayq.CodeBadTTR, field+"ttr"); err != nil {
		return r, err
	}
	if p.maxAttempts != nil {
		n := int(*p.maxAttempts)
		r.MaxAttempts = &n
	}
	return r, nil
}

// fromJob is j on the wire, as the HTTP API writes it (api.FromJob):
// reservation and deadline only while it is reserved (a job read back
// carries no stale token), ended_at only once it ended, its attempts.
func fromJob(j *delayq.Job) *delayqv1.Job {
	if j == nil {
		return nil
	}
	w := &delayqv1.Job{
		Id: j.ID, Seq: j.Seq, Topic: j.Topic, State: string(j.State), Body: j.Body,
		Priority: j.Priority, Ttr: durationpb.New(j.TTR), MaxAttempts: clamp32(j.MaxAttempts),
		Attempts: clamp32(j.Attempts), Due: timestamppb.New(j.Due), Created: timestamppb.New(j.Created),
		Timeouts: clamp32(j.Timeouts), Releases: clamp32(j.Releases), Buries: clamp32(j.Buries), Kicks: clamp32(j.Kicks),
		LastReason: j.LastReason,
	}
	if !j.LastFailed.IsZero() {
		w.LastFailed = timestamppb.New(j.LastFailed)
	}
	if j.State == delayq.StateReserved {
		w.Reservation = j.Reservation
		w.Deadline = timestamppb.New(j.Deadline)
	}
	if !j.Ended.IsZero() {
		w.EndedAt = timestamppb.New(j.Ended)
	}
	if len(j.History) > 0 {
		w.History = make([]*delayqv1.Attempt, len(j.History))
		for i, a := range j.History {
			w.History[i] = &delayqv1.Attempt{Attempt: clamp32(a.N), ReservedAt: timestamppb.New(a.Reserved), By: a.By,
				Outcome: string(a.Outcome), Reason: a.Reason}
			if !a.Ended.IsZero() {
				w.History[i].EndedAt = timestamppb.New(a.Ended)
			}
		}
	}
	return w
}

// fromJobs converts jobs.
func fromJobs(jobs []*delayq.Job) []*delayqv1.Job {
	out := make([]*delayqv1.Job, len(jobs))
	for i, j := range jobs {
		out[i] = fromJob(j)
	}
	return out
}

// clamp32 fits a counter into an int32 field; counters that large do not
// happen, but a wrapped negative count would be worse than a stuck one.
func clamp32(n int) int32 {
	return int32(max(min(n, math.MaxInt32), math.MinInt32))
}
