package client

import (
	"context"
	"net/http"
	"time"

	"github.com/delayq/delayq/api"
)

// maybeDiscover refreshes the cluster members when the last refresh is
// older than the discovery period. Only one caller refreshes at a time; the
// others go on with the addresses they have. Failures are ignored: a server
// without /v1/cluster simply leaves the given addresses in use.
func (c *Client) maybeDiscover(ctx context.Context) {
	if c.discover <= 0 || !c.discoverMu.TryLock() {
		return
	}
	defer c.discoverMu.Unlock()
	if !c.discovered.IsZero() && time.Since(c.discovered) < c.discover {
		return
	}
	c.discovered = time.Now()
	c.refresh(ctx)
}

// Discover asks a server for the cluster's live members now and adds them
// to the client's addresses (members that left are dropped; the addresses
// given to New are always kept).
func (c *Client) Discover(ctx context.Context) error {
	c.discoverMu.Lock()
	defer c.discoverMu.Unlock()
	c.discovered = time.Now()
	return c.refresh(ctx)
}

// refresh does one GET /v1/cluster, trying each address once.
func (c *Client) refresh(ctx context.Context) error {
	var out api.ClusterResponse
	var err error
	tried := map[string]bool{}
	for range c.addrs.bases() {
		base := c.addrs.pick(time.Now(), tried)
		tried[base] = true
		var res result
		cl := call{method: http.MethodGet, path: "/v1/cluster", out: &out, timeout: min(c.timeout, 5*time.Second)}
		if err, _ = c.once(ctx, base, cl, nil, &res); err == nil {
			break
		}
	}
	if err != nil || len(out.Instances) == 0 {
		return err
	}
	var bases []string
	for _, in := range out.Instances {
		if b, err := normalizeAddr(in.URL); err == nil {
			bases = append(bases, b)
		}
	}
	c.addrs.setMembers(bases)
	c.log.DebugContext(ctx, "delayq client: cluster members", "addrs", c.addrs.bases())
	return nil
}
