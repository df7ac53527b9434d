package client

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// alarmPath is /v1/alarms/{name}.
func alarmPath(name string) string { return "/v1/alarms/" + url.PathEscape(name) }

// PutAlarm creates or replaces the alarm name (PUT /v1/alarms/{name}):
// the server POSTs an api.AlarmEvent to r.URL when one of r.When's
// conditions starts to hold for a topic matching r.Topics, every r.Repeat
// while it holds, and once when it resolves. It is idempotent, so it is
// retried after a network error; replacing keeps the firing state.
func (c *Client) PutAlarm(ctx context.Context, name string, r api.AlarmRequest) (*api.Alarm, error) {
	var out api.Alarm
	if _, err := c.do(ctx, call{method: http.MethodPut, path: alarmPath(name), in: r, out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetAlarm returns the alarm name with its state per topic and condition
// (GET /v1/alarms/{name}).
func (c *Client) GetAlarm(ctx context.Context, name string) (*api.Alarm, error) {
	var out api.Alarm
	if _, err := c.do(ctx, call{method: http.MethodGet, path: alarmPath(name), out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListAlarms returns every alarm with its state, sorted by name
// (GET /v1/alarms).
func (c *Client) ListAlarms(ctx context.Context) ([]api.Alarm, error) {
	var out api.AlarmsResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/alarms", out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return out.Alarms, nil
}

// DeleteAlarm removes the alarm name (DELETE /v1/alarms/{name}); a firing
// alarm sends no resolved event. A retried delete that finds it gone
// reports success.
func (c *Client) DeleteAlarm(ctx context.Context, name string) error {
	res, err := c.do(ctx, call{method: http.MethodDelete, path: alarmPath(name), mode: retrySafe})
	if err != nil && res.ambiguous && errors.Is(err, delayq.ErrNotFound) {
		return nil
	}
	return err
}
