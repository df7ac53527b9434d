package httpapi

import (
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
)

// toPut turns a wire put into an engine put, filling the defaults (ttr
// 60 s, priority 1024; the topic policy's ttr and max_attempts, if any,
// replace those the producer left out). It only translates: the engine checks every
// field, "delay or at, not both" included.
func toPut(topic string, p *api.PutRequest) (engine.PutRequest, error) {
	body, err := api.DecodeBody(p.Body, p.BodyBase64)
	if err != nil {
		return engine.PutRequest{}, err
	}
	r := engine.PutRequest{ID: p.ID, Topic: topic, Body: body, TTR: delayq.DefaultTTR, Priority: delayq.DefaultPriority,
		InheritTTR: p.TTR == nil, InheritMaxAttempts: p.MaxAttempts == nil}
	r.Delay, r.At = when(p.Delay, p.At)
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

// when translates the wire's delay and at, as given (either, both or
// neither), for the engine to judge.
func when(d *api.Duration, at *api.Time) (*time.Duration, *time.Time) {
	var delay *time.Duration
	if d != nil {
		v := time.Duration(*d)
		delay = &v
	}
	if at != nil {
		return delay, &at.Time
	}
	return delay, nil
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
