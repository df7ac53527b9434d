package httpapi

import (
	"context"
	"encoding/base64"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/limits"
)

// A batch put's memory is mostly not its wire bytes. A heap profile of 12
// concurrent batch puts of 1,000 base64 bodies of 64 KiB (issue 18,
// docs/benchmarks.md) found, per batch of 87 MB on the wire: the JSON
// strings as decoded (87 MB), the decoded bodies (65 MB), and four more
// copies of the bodies on the way into the embedded store: the store's
// own copy of each job (Job.Clone), its encoded record, the record in
// the Pebble batch, and the batch applied to the group commit (65 MB
// each). Charging the wire bytes alone let three such batches in under
// the default 256 MiB budget and they held 1.2 GB.

// putCopies is how many copies of a job's body a put holds at once on
// its way to the store, besides the wire bytes its body reader charged:
// the decoded body and the store's four.
const putCopies = 5

// putJobOverhead is what one job costs beside its body: the engine's and
// the store's job structs, record headers, keys and index entries.
const putJobOverhead = 1 << 10

// putCost is what p will cost in memory once decoded and on its way to
// the store, before any of it is allocated.
func putCost(p *api.PutRequest) int64 {
	n := 0
	switch {
	case p.BodyBase64 != nil:
		n = base64.StdEncoding.DecodedLen(len(*p.BodyBase64))
	case p.Body != nil:
		n = len(*p.Body)
	}
	return int64(n)*putCopies + putJobOverhead + int64(len(p.ID))
}

// chargePut charges what p will cost to the request's share of
// --max-inflight-bytes (limits.Bytes), waiting as a body read waits. The
// bytes stay charged until the request is answered: the copies live at
// least until the store has the job, and the strings a batch drops are
// garbage the collector may not yet have reclaimed.
func chargePut(ctx context.Context, p *api.PutRequest) error {
	return limits.ChargeFrom(ctx).Take(ctx, putCost(p))
}
