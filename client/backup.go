package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// Backup streams a consistent copy of one server's embedded store to w: a
// tar archive that, extracted into an empty directory, is a data directory
// (`delayq backup DIR` does the extracting). It asks the first address
// the client was given, with no time limit beyond ctx, since an archive is
// as large as the store; a Redis-backed server refuses (back up Redis).
func (c *Client) Backup(ctx context.Context, w io.Writer) error {
	base := c.addrs.bases()[0]
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/backup", nil)
	if err != nil {
		return fmt.Errorf("client: backup: %w", err)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return fmt.Errorf("client: backup from %s: %w", base, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		return decodeError(resp.StatusCode, data)
	}
	if _, err := io.Copy(w, resp.Body); err != nil {
		return fmt.Errorf("client: backup from %s cut short: %w", base, err)
	}
	return nil
}
