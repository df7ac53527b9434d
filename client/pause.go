package client

import (
	"context"
	"net/http"
	"net/url"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// PauseTopic stops reserves from topic for d, or until ResumeTopic when d
// is 0 (POST /v1/topics/{topic}/pause). Puts into it still work. It is
// idempotent, so it is retried after a network error.
func (c *Client) PauseTopic(ctx context.Context, topic string, d time.Duration) (api.Topic, error) {
	var in api.PauseRequest
	if d != 0 {
		in.For = ptr(api.Duration(d))
	}
	var out api.Topic
	_, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/pause", in: in, out: &out, mode: retrySafe})
	return out, err
}

// ResumeTopic ends topic's pause at once (POST /v1/topics/{topic}/resume).
func (c *Client) ResumeTopic(ctx context.Context, topic string) (api.Topic, error) {
	var out api.Topic
	_, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/resume", out: &out, mode: retrySafe})
	return out, err
}

// Purge deletes topic's jobs in state (required), whatever their
// reservation, and returns how many it deleted
// (DELETE /v1/topics/{topic}/jobs?state=). Retried only when unsent: a
// blind retry would delete jobs that arrived since.
func (c *Client) Purge(ctx context.Context, topic string, state delayq.State) (int, error) {
	var out api.PurgeResponse
	_, err := c.do(ctx, call{method: http.MethodDelete, path: topicPath(topic) + "/jobs?state=" + url.QueryEscape(string(state)), out: &out, mode: retryUnsent})
	return out.Deleted, err
}
