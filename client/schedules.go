package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// ScheduleRequest defines a periodic job: at each tick of Cron (a cron
// spec, seconds optional, or a descriptor such as "@hourly" or
// "@every 90s") or of Every, the server puts one job with Body into Topic.
// Zero fields take the server's defaults (ttr 60 s, priority 1024,
// timezone UTC, missed "skip").
type ScheduleRequest struct {
	Topic       string
	Cron        string
	Every       time.Duration
	Body        []byte
	TTR         time.Duration
	Priority    *uint32
	MaxAttempts int
	// Timezone is the IANA zone cron fields are read in ("Europe/Berlin").
	Timezone string
	// Missed is what happens to ticks that passed while no server ran:
	// "skip", "one" (the latest) or "all" (each, at most 1,000).
	Missed string
}

// Schedule is a periodic job as the server keeps it. The job of each tick
// has the id "{Name}:{tick in unix ms}".
type Schedule struct {
	Name, Topic, Cron, Timezone, Missed string
	Body                                []byte
	TTR                                 time.Duration
	Priority                            uint32
	MaxAttempts                         int
	Paused                              bool
	Created, Updated                    time.Time
	// Last is the latest tick fired; zero before the first.
	Last time.Time
	// Next holds the next fire times (up to 5).
	Next []time.Time
}

// schedulePath is /v1/schedules/{name}.
func schedulePath(name string) string { return "/v1/schedules/" + url.PathEscape(name) }

// PutSchedule creates or replaces the schedule name
// (PUT /v1/schedules/{name}). It is idempotent, so it is retried after a
// network error. Replacing keeps the ticks already fired.
func (c *Client) PutSchedule(ctx context.Context, name string, r ScheduleRequest) (*Schedule, error) {
	w := api.ScheduleRequest{Topic: r.Topic, Cron: r.Cron, Priority: r.Priority, Timezone: r.Timezone, Missed: r.Missed}
	w.Body, w.BodyBase64 = api.EncodeBody(r.Body)
	if r.Every != 0 {
		w.Every = ptr(api.Duration(r.Every))
	}
	if r.TTR != 0 {
		w.TTR = ptr(api.Duration(r.TTR))
	}
	if r.MaxAttempts != 0 {
		w.MaxAttempts = ptr(r.MaxAttempts)
	}
	return c.scheduleCall(ctx, call{method: http.MethodPut, path: schedulePath(name), in: w, mode: retrySafe})
}

// Schedule returns the schedule name (GET /v1/schedules/{name}).
func (c *Client) Schedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleCall(ctx, call{method: http.MethodGet, path: schedulePath(name), mode: retrySafe})
}

// Schedules returns every schedule, sorted by name (GET /v1/schedules).
func (c *Client) Schedules(ctx context.Context) ([]*Schedule, error) {
	var out api.SchedulesResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/schedules", out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	all := make([]*Schedule, 0, len(out.Schedules))
	for i := range out.Schedules {
		s, err := fromWireSchedule(&out.Schedules[i])
		if err != nil {
			return nil, err
		}
		all = append(all, s)
	}
	return all, nil
}

// DeleteSchedule removes the schedule name (DELETE /v1/schedules/{name});
// the jobs it already put stay. A retried delete that finds it gone
// reports success.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	res, err := c.do(ctx, call{method: http.MethodDelete, path: schedulePath(name), mode: retrySafe})
	if err != nil && res.ambiguous && errors.Is(err, delayq.ErrNotFound) {
		return nil
	}
	return err
}

// PauseSchedule stops the schedule from firing until ResumeSchedule
// (POST /v1/schedules/{name}/pause).
func (c *Client) PauseSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleCall(ctx, call{method: http.MethodPost, path: schedulePath(name) + "/pause", mode: retrySafe})
}

// ResumeSchedule makes a paused schedule fire again from now on; the ticks
// it slept through do not fire (POST /v1/schedules/{name}/resume).
func (c *Client) ResumeSchedule(ctx context.Context, name string) (*Schedule, error) {
	return c.scheduleCall(ctx, call{method: http.MethodPost, path: schedulePath(name) + "/resume", mode: retrySafe})
}

// scheduleCall runs a call whose answer is one schedule.
func (c *Client) scheduleCall(ctx context.Context, cl call) (*Schedule, error) {
	var out api.Schedule
	cl.out = &out
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	return fromWireSchedule(&out)
}

func fromWireSchedule(w *api.Schedule) (*Schedule, error) {
	s := &Schedule{
		Name: w.Name, Topic: w.Topic, Cron: w.Cron, Timezone: w.Timezone, Missed: w.Missed,
		TTR: time.Duration(w.TTR * float64(time.Second)), Priority: w.Priority, MaxAttempts: w.MaxAttempts,
		Paused: w.Paused, Created: w.Created.Time, Updated: w.Updated.Time,
	}
	b, err := api.DecodeBody(w.Body, w.BodyBase64)
	if err != nil {
		return nil, fmt.Errorf("delayq: schedule %s: %w", w.Name, err)
	}
	s.Body = b
	if w.Last != nil {
		s.Last = w.Last.Time
	}
	for _, t := range w.Next {
		s.Next = append(s.Next, t.Time)
	}
	return s, nil
}
