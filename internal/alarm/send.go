package alarm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/redact"
)

// sender delivers one alarm's events in order, so a resolution never
// overtakes the firing it resolves; alarms do not wait for each other.
type sender struct {
	q chan delivery
}

// delivery is one event with how to send it, copied from the alarm when
// the event is made, so a PUT meanwhile does not change it half-way.
type delivery struct {
	url     string
	format  string
	secret  string
	headers map[string]string
	ev      api.AlarmEvent
}

// enqueue hands ev to a's sender, starting one if none runs. It never
// blocks: with queueLen events already waiting (a receiver down for long)
// the event is dropped and logged.
func (s *Service) enqueue(a *Alarm, ev api.AlarmEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		s.met.event(outcomeDropped)
		s.log.Warn("alarms: shutting down; event not sent", "alarm", a.Name, "topic", ev.Topic, "condition", ev.Condition, "state", ev.State)
		return
	}
	sd := s.senders[a.Name]
	if sd == nil {
		sd = &sender{q: make(chan delivery, queueLen)}
		s.senders[a.Name] = sd
		s.wg.Add(1)
		go s.run(a.Name, sd)
	}
	select {
	case sd.q <- delivery{url: a.URL, format: a.format(), secret: a.Secret, headers: a.Headers, ev: ev}:
	default:
		s.met.event(outcomeDropped)
		s.log.Error("alarms: too many events waiting for the receiver; event dropped", "alarm", a.Name, "url", redact.String(a.URL),
			"topic", ev.Topic, "condition", ev.Condition, "state", ev.State)
	}
}

// run delivers queued events until the queue is empty, then ends (the
// next event starts a new sender).
func (s *Service) run(name string, sd *sender) {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		select {
		case d := <-sd.q:
			s.mu.Unlock()
			s.deliver(name, d)
		default:
			delete(s.senders, name)
			s.mu.Unlock()
			return
		}
	}
}

// deliver POSTs one event, retrying with backoff, and logs it given up.
func (s *Service) deliver(name string, d delivery) {
	body, err := render(d.format, d.ev)
	if err != nil {
		s.log.Error("alarms: encoding an event failed", "alarm", name, "err", redact.Error(err))
		return
	}
	wait := s.cfg.Backoff
	for attempt := 0; ; attempt++ {
		err = s.post(&d, body)
		if err == nil {
			s.met.event(outcomeSent)
			return
		}
		if attempt >= s.cfg.Retries || s.sendCtx.Err() != nil {
			break
		}
		s.log.Info("alarms: sending an event failed; retrying", "alarm", name, "url", redact.String(d.url), "attempt", attempt+1, "retry_in", wait, "err", redact.Error(err))
		t := time.NewTimer(wait)
		select {
		case <-s.sendCtx.Done():
			t.Stop()
		case <-t.C:
		}
		wait = min(2*wait, maxBackoff)
	}
	s.met.event(outcomeGivenUp)
	s.log.Error("alarms: event not delivered; giving up", "alarm", name, "url", redact.String(d.url), "topic", d.ev.Topic,
		"condition", d.ev.Condition, "state", d.ev.State, "err", redact.Error(err))
}

// post sends one event once; a 2xx answer is success.
func (s *Service) post(d *delivery, body []byte) error {
	ctx, cancel := context.WithTimeout(s.sendCtx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, d.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("User-Agent", "delayq-alarm")
	setHeaders(req.Header, d, body, time.Now()) // may replace User-Agent
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		return fmt.Errorf("the receiver answered %s, and redirects are not followed (the alarm's URL must be the receiver's own)", resp.Status)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("the receiver answered %s", resp.Status)
	}
	return nil
}
