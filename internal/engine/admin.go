package engine

import (
	"context"
	"io"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// ErrNoBackup is returned by Backup when the store cannot copy itself:
// the Redis store, the only one a server runs that has no Backup. It
// matches delayq.ErrNotSupported (HTTP 501 not_supported).
var ErrNoBackup error = &delayq.NotSupportedError{Reason: "this server's store is Redis: back up Redis itself (docs/redis.md)"}

// Backup writes a consistent copy of the store, taken while it serves, to
// w as a tar archive that is a data directory once extracted.
func (e *Engine) Backup(ctx context.Context, w io.Writer) error {
	b, ok := e.base.(store.Backuper)
	if !ok {
		return e.recordAdmin("backup", ErrNoBackup)
	}
	start := time.Now()
	err := b.Backup(ctx, w)
	if err == nil {
		e.log.Info("backup written", "took", time.Since(start).Round(time.Millisecond))
	}
	return e.recordAdmin("backup", err)
}

// Health says why the store is degraded (below its free-space floor,
// failed), or "" when it is well or cannot tell.
func (e *Engine) Health() string {
	if h, ok := e.base.(store.Healther); ok {
		return h.Health()
	}
	return ""
}
