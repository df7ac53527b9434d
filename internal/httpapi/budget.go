package httpapi

import (
	"context"
	"encoding/base64"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/limits"
)

// putCost is what p will cost in memory once decoded and on its way to
// the store, before any of it is allocated (limits.PutCost says why it is
// more than its wire bytes).
func putCost(p *api.PutRequest) int64 {
	n := 0
	switch {
	case p.BodyBase64 != nil:
		n = base64.StdEncoding.DecodedLen(len(*p.BodyBase64))
	case p.Body != nil:
		n = len(*p.Body)
	}
	return limits.PutCost(n, len(p.ID))
}

// chargePut charges what p will cost to the request's share of
// --max-inflight-bytes (limits.Bytes), waiting as a body read waits. The
// bytes stay charged until the request is answered: the copies live at
// least until the store has the job, and the strings a batch drops are
// garbage the collector may not yet have reclaimed.
func chargePut(ctx context.Context, p *api.PutRequest) error {
	return limits.ChargeFrom(ctx).Take(ctx, putCost(p))
}
