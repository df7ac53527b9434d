package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Client is the low-level HTTP v1 client: one method per endpoint. It spreads
// calls over every known server address, fails over when one is down and
// retries, a bounded number of times, the calls that are safe to repeat.
// Producer and Consumer are built on it. A Client is safe for concurrent use.
type Client struct {
	hc          *http.Client
	addrs       *addrSet
	maxAttempts int
	retryWait   time.Duration
	timeout     time.Duration
	discover    time.Duration
	log         *slog.Logger

	discoverMu sync.Mutex
	discovered time.Time // guarded by discoverMu: last GET /v1/cluster
}

// New returns a Client for the servers at addrs ("127.0.0.1:7480" or
// "http://host:7480"). It panics when addrs is empty or an address cannot be
// parsed: that is a programming error, as with regexp.MustCompile.
func New(addrs []string, opts ...Option) *Client {
	c, err := NewClient(addrs, opts...)
	if err != nil {
		panic(err)
	}
	return c
}

// NewClient is New returning an error instead of panicking, for addresses
// that come from configuration.
func NewClient(addrs []string, opts ...Option) (*Client, error) {
	if len(addrs) == 0 {
		return nil, errors.New("client: no server address")
	}
	bases := make([]string, 0, len(addrs))
	for _, a := range addrs {
		b, err := normalizeAddr(a)
		if err != nil {
			return nil, err
		}
		bases = append(bases, b)
	}
	cfg := clientConfig{
		hc:          http.DefaultClient,
		maxAttempts: 4,
		retryWait:   50 * time.Millisecond,
		timeout:     30 * time.Second,
		discover:    time.Minute,
		log:         slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o.applyClient(&cfg)
	}
	hc, err := cfg.secure()
	if err != nil {
		return nil, err
	}
	return &Client{
		hc: hc, addrs: newAddrSet(bases), maxAttempts: max(cfg.maxAttempts, 1),
		retryWait: cfg.retryWait, timeout: cfg.timeout, discover: cfg.discover, log: cfg.log,
	}, nil
}

// Addrs returns every server address the client knows: the ones it was
// given and the members it learned from GET /v1/cluster.
func (c *Client) Addrs() []string { return c.addrs.bases() }

// retryMode says when a call may be sent again.
type retryMode int

const (
	// retrySafe: repeating the call has the same effect as sending it once
	// (reads, touch, and writes the client made idempotent).
	retrySafe retryMode = iota
	// retryUnsent: repeat only when the first attempt certainly never
	// reached a server (connection refused) or the server refused it as
	// draining.
	retryUnsent
)

// call is one HTTP request.
type call struct {
	method, path string
	in           any // JSON body, or nil
	out          any // decoded on success when not nil
	mode         retryMode
	timeout      time.Duration // per attempt; 0 means the client's timeout
}

// result tells the caller what happened on the way to its answer.
type result struct {
	// ambiguous: an earlier attempt may have been applied by a server even
	// though no answer came back (the connection broke after sending).
	ambiguous bool
}

// do sends cl, retrying on another address as its mode allows.
func (c *Client) do(ctx context.Context, cl call) (result, error) {
	var res result
	var body []byte
	if cl.in != nil {
		b, err := json.Marshal(cl.in)
		if err != nil {
			return res, fmt.Errorf("client: encode %s %s: %w", cl.method, cl.path, err)
		}
		body = b
	}
	c.maybeDiscover(ctx)
	tried := map[string]bool{}
	var lastErr error
	for attempt := range c.maxAttempts {
		if attempt > 0 && len(tried) >= len(c.addrs.bases()) {
			if err := sleepCtx(ctx, c.retryDelay(attempt)); err != nil {
				return res, lastErr
			}
			clear(tried)
		}
		base := c.addrs.pick(time.Now(), tried)
		tried[base] = true
		err, retry := c.once(ctx, base, cl, body, &res)
		if err == nil || !retry {
			return res, err
		}
		lastErr = err
		c.log.DebugContext(ctx, "delayq client: retrying", "method", cl.method, "path", cl.path, "addr", base, "err", err)
	}
	return res, lastErr
}

// retryDelay is the pause before a new round over every address.
func (c *Client) retryDelay(attempt int) time.Duration {
	d := nominal(c.retryWait, 2*time.Second, attempt)
	return d/2 + rand.N(d/2+1)
}

// once sends cl to base and reports whether a failure may be retried.
func (c *Client) once(ctx context.Context, base string, cl call, body []byte, res *result) (err error, retry bool) {
	timeout := cl.timeout
	if timeout <= 0 {
		timeout = c.timeout
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, cl.method, base+cl.path, rd)
	if err != nil {
		return fmt.Errorf("client: %s %s: %w", cl.method, cl.path, err), false
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.transportErr(ctx, base, cl, err, res)
	}
	defer resp.Body.Close()
	c.addrs.markUp(base)
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return c.transportErr(ctx, base, cl, err, res)
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		if cl.out != nil && len(bytes.TrimSpace(data)) > 0 {
			if err := json.Unmarshal(data, cl.out); err != nil {
				return fmt.Errorf("client: %s %s: decode answer: %w", cl.method, cl.path, err), false
			}
		}
		return nil, false
	}
	rerr := decodeError(resp.StatusCode, data)
	if errors.Is(rerr, delayq.ErrDraining) {
		return rerr, true // refused before doing anything: safe to send elsewhere
	}
	if re := (*api.RemoteError)(nil); errors.As(rerr, &re) && api.IsMomentaryLimit(re.Code) {
		return rerr, true // a limit refused it before doing anything; retried after the backoff
	}
	return rerr, cl.mode == retrySafe && errors.Is(rerr, delayq.ErrUnavailable)
}

// transportErr classifies an error that left no HTTP answer.
func (c *Client) transportErr(ctx context.Context, base string, cl call, err error, res *result) (error, bool) {
	if ctx.Err() != nil {
		return ctx.Err(), false
	}
	c.addrs.markDown(base, time.Now())
	unsent := isDialError(err)
	if !unsent {
		res.ambiguous = true
	}
	return &unreachableError{addr: hostOf(base), sent: !unsent, err: err}, unsent || cl.mode == retrySafe
}

// isDialError reports whether err happened before the request left: a
// refused or failed connection.
func isDialError(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "dial"
}

// decodeError turns an error answer into an error wrapping the matching
// delayq sentinel. Answers that are not delayq's JSON (a proxy's page) still
// map by status: 503 is ErrUnavailable, other 4xx are ErrInvalid.
func decodeError(status int, data []byte) error {
	var er api.ErrorResponse
	if err := json.Unmarshal(data, &er); err != nil || er.Error.Code == "" {
		msg := string(bytes.TrimSpace(data))
		if len(msg) > 200 {
			msg = msg[:200] + "..."
		}
		if msg == "" {
			msg = http.StatusText(status)
		}
		er.Error.Message = fmt.Sprintf("HTTP %d: %s", status, msg)
		er.Error.Code = fmt.Sprintf("http_%d", status)
		if status == http.StatusServiceUnavailable || status == http.StatusBadGateway || status == http.StatusGatewayTimeout {
			er.Error.Code = api.CodeUnavailable
		}
	}
	return er.Err(status)
}

// sleepCtx waits d or until ctx is done.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Close closes the client's idle connections. The client stays usable; Close
// only stops connections from lingering after the caller is done.
func (c *Client) Close() { c.hc.CloseIdleConnections() }
