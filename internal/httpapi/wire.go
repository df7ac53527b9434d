package httpapi

import (
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
)

// toPut turns a wire put into an engine put. It only translates: a field
// the producer left out stays nil for the engine to fill (defaults and
// the topic's policy), and the engine checks every field, "delay or at,
// not both" included.
func toPut(topic string, p *api.PutRequest) (engine.PutRequest, error) {
	body, err := api.DecodeBody(p.Body, p.BodyBase64)
	if err != nil {
		return engine.PutRequest{}, err
	}
	r := engine.PutRequest{ID: p.ID, Topic: topic, Body: body, Priority: p.Priority, MaxAttempts: p.MaxAttempts}
	r.Delay, r.At = when(p.Delay, p.At)
	if p.TTR != nil {
		ttr := time.Duration(*p.TTR)
		r.TTR = &ttr
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
