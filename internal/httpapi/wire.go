package httpapi

import (
	"encoding/base64"
	"time"
	"unicode/utf8"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
)

// toPut turns a wire put into an engine put, filling the defaults (ttr
// 60 s, priority 1024) and refusing what the engine cannot see: delay and
// at together, body and body_base64 together, invalid base64.
func toPut(topic string, p *api.PutRequest) (engine.PutRequest, error) {
	body, err := bodyOf(p.Body, p.BodyBase64)
	if err != nil {
		return engine.PutRequest{}, err
	}
	if p.Delay != nil && p.At != nil {
		return engine.PutRequest{}, delayq.Invalid("bad_delay", "delay", "give delay or at, not both")
	}
	r := engine.PutRequest{ID: p.ID, Topic: topic, Body: body, TTR: delayq.DefaultTTR, Priority: delayq.DefaultPriority}
	if p.Delay != nil {
		r.Delay = time.Duration(*p.Delay)
	}
	if p.At != nil {
		if p.At.IsZero() {
			return engine.PutRequest{}, errZeroAt()
		}
		r.At = p.At.Time
	}
	if p.TTR != nil {
		r.TTR = time.Duration(*p.TTR)
	}
	if p.Priority != nil {
		r.Priority = *p.Priority
	}
	if p.MaxAttempts != nil {
		r.MaxAttempts = *p.MaxAttempts
	}
	return r, nil
}

// errZeroAt refuses the zero time, which the engine reads as "no at".
func errZeroAt() error {
	return delayq.Invalid("bad_at", "at", "0001-01-01T00:00:00Z is not a usable time")
}

// bodyOf returns the body given as a string or as base64; nil when
// neither is given. A given empty body is a non-nil empty slice, so an
// update can tell "clear the body" from "keep it".
func bodyOf(s, b64 *string) ([]byte, error) {
	switch {
	case s != nil && b64 != nil:
		return nil, delayq.Invalid("bad_body", "body", "give body or body_base64, not both")
	case s != nil:
		return []byte(*s), nil
	case b64 != nil:
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, delayq.Invalid("bad_body", "body_base64", "not standard base64: %v", err)
		}
		return b, nil
	}
	return nil, nil
}

// toJob is a job on the wire: the body as a string when it is valid UTF-8,
// as base64 otherwise; reservation and deadline only while reserved.
func toJob(j *delayq.Job) api.Job {
	w := api.Job{
		ID: j.ID, Seq: j.Seq, Topic: j.Topic, State: string(j.State),
		Priority: j.Priority, TTR: j.TTR.Seconds(), MaxAttempts: j.MaxAttempts,
		Attempts: j.Attempts, Due: api.Time{Time: j.Due}, Created: api.Time{Time: j.Created},
	}
	if utf8.Valid(j.Body) {
		s := string(j.Body)
		w.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(j.Body)
		w.BodyBase64 = &s
	}
	if j.State == delayq.StateReserved {
		w.Reservation = j.Reservation
		w.Deadline = &api.Time{Time: j.Deadline}
	}
	return w
}

// toJobs converts jobs; never nil, so it encodes as [].
func toJobs(jobs []*delayq.Job) []api.Job {
	out := make([]api.Job, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, toJob(j))
	}
	return out
}

// toTopic is a topic's stats on the wire, ages measured at now.
func toTopic(t delayq.TopicStats, now time.Time) api.Topic {
	w := api.Topic{
		Name: t.Name, Delayed: t.Delayed, Ready: t.Ready, Reserved: t.Reserved, Buried: t.Buried,
		Paused: now.Before(t.PausedUntil),
	}
	if !t.OldestReady.IsZero() {
		w.OldestReadyAge = max(now.Sub(t.OldestReady), 0).Seconds()
	}
	return w
}
