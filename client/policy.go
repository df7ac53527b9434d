package client

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Policy is a topic's policy. Zero fields set nothing: jobs put without
// a ttr or max_attempts take TTR and MaxAttempts; Backoff delays a job
// released without a delay, or whose TTR ran out; MaxJobs bounds the
// topic's live jobs (a put past it fails with an error wrapping
// delayq.ErrLimit, code topic_full).
type Policy struct {
	TTR         time.Duration
	MaxAttempts int
	Backoff     *PolicyBackoff
	MaxJobs     int
}

// PolicyBackoff is a policy's backoff: attempt n waits Initial·Factor^(n-1), at
// most Max, spread by ±Jitter of itself. Zero Max and Factor take the
// server's defaults (1h, 2).
type PolicyBackoff struct {
	Initial, Max time.Duration
	Factor       float64
	Jitter       float64
}

// policyPath is /v1/topics/{topic}/policy.
func policyPath(topic string) string { return topicPath(topic) + "/policy" }

// SetPolicy makes p topic's policy, replacing any it had
// (PUT /v1/topics/{topic}/policy), and returns it as the server keeps it
// (the backoff's defaults filled in). It is idempotent, so it is retried
// after a network error.
func (c *Client) SetPolicy(ctx context.Context, topic string, p Policy) (*Policy, error) {
	var in api.PolicyRequest
	if p.TTR != 0 {
		in.TTR = ptr(api.Duration(p.TTR))
	}
	if p.MaxAttempts != 0 {
		in.MaxAttempts = ptr(p.MaxAttempts)
	}
	if p.MaxJobs != 0 {
		in.MaxJobs = ptr(p.MaxJobs)
	}
	if b := p.Backoff; b != nil {
		in.Backoff = &api.BackoffRequest{Initial: ptr(api.Duration(b.Initial))}
		if b.Max != 0 {
			in.Backoff.Max = ptr(api.Duration(b.Max))
		}
		if b.Factor != 0 {
			in.Backoff.Factor = ptr(b.Factor)
		}
		if b.Jitter != 0 {
			in.Backoff.Jitter = ptr(b.Jitter)
		}
	}
	var out api.Policy
	if _, err := c.do(ctx, call{method: http.MethodPut, path: policyPath(topic), in: in, out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return fromPolicy(out), nil
}

// GetPolicy returns topic's policy (GET /v1/topics/{topic}/policy), or an
// error wrapping delayq.ErrNotFound when it has none.
func (c *Client) GetPolicy(ctx context.Context, topic string) (*Policy, error) {
	var out api.Policy
	if _, err := c.do(ctx, call{method: http.MethodGet, path: policyPath(topic), out: &out, mode: retrySafe}); err != nil {
		return nil, err
	}
	return fromPolicy(out), nil
}

// DeletePolicy removes topic's policy (DELETE /v1/topics/{topic}/policy);
// its jobs keep what they were put with. A retried delete that finds it
// gone reports success.
func (c *Client) DeletePolicy(ctx context.Context, topic string) error {
	res, err := c.do(ctx, call{method: http.MethodDelete, path: policyPath(topic), mode: retrySafe})
	if err != nil && res.ambiguous && errors.Is(err, delayq.ErrNotFound) {
		return nil
	}
	return err
}

func fromPolicy(w api.Policy) *Policy {
	p := &Policy{MaxAttempts: w.MaxAttempts, MaxJobs: w.MaxJobs}
	if w.TTR != nil {
		p.TTR = time.Duration(*w.TTR)
	}
	if b := w.Backoff; b != nil {
		p.Backoff = &PolicyBackoff{Initial: time.Duration(b.Initial), Max: time.Duration(b.Max), Factor: b.Factor, Jitter: b.Jitter}
	}
	return p
}
