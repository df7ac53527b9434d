package client

import (
	"context"
	"net/http"
	"time"

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
