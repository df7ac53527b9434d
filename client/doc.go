// Package client is delayq's Go SDK. It speaks the HTTP v1 API of any
// number of delayq servers.
//
// A producer schedules jobs; a consumer runs a handler on each job when it
// is due:
//
//	p := client.NewProducer("127.0.0.1:7480")
//	// Close order 42 in 30 minutes unless it is paid first.
//	_, err := p.Delay(ctx, "orderclose", []byte(`{"order":42}`), 30*time.Minute,
//		client.ID("orderclose-42"))
//	// Paid: revoke it.
//	err = p.Revoke(ctx, "orderclose-42")
//
//	c := client.NewConsumer([]string{"127.0.0.1:7480"}, "orderclose", client.Concurrency(16))
//	err = c.Consume(ctx, func(ctx context.Context, j *client.Job) error {
//		return closeOrder(ctx, j.Body) // nil: done; error: retried with backoff
//	})
//
// # Guarantees and how the SDK keeps them
//
// Delivery is at least once: a handler may see a job again after a crash,
// a lost answer or a TTR that ran out, so make handlers idempotent.
//
//   - Puts are safe to retry. Every Producer put carries an id (yours, via
//     ID, or a UUIDv7 made before the first attempt); a retry after a
//     network error that finds the job already there reports success.
//   - A consumer reserves at most as many jobs as it has idle workers and
//     long-polls when there is nothing to do.
//   - A handler's context ends a safety margin before the job's TTR runs out
//     (context.Cause is ErrTTR); call j.Touch, or use AutoTouch, to run
//     longer.
//   - nil finishes the job; an error releases it with exponential backoff
//     and jitter (RetryBackoff, RetryAfter); Permanent(err) buries it; a
//     panic is an error.
//   - Cancelling Consume's context stops reserving, lets running handlers
//     finish for the Grace period, then cancels them (ErrShutdown) and
//     releases their jobs at once.
//
// Errors wrap the delayq sentinels: errors.Is(err, delayq.ErrExists),
// delayq.ErrNotFound, delayq.ErrNotReserved, delayq.ErrInvalid,
// delayq.ErrUnavailable (no server answered).
//
// # Several servers
//
// Give every address you know. The client learns the others from GET
// /v1/cluster (Discovery), spreads calls over them round-robin, skips one
// that refused a connection for a while, and retries a bounded number of
// times (CallAttempts): reads, touches, finishes and puts with an id on any
// network error; everything else only when it certainly never reached a
// server.
//
// Client is the low-level client with one method per endpoint, for tools
// and for what Producer and Consumer do not cover. Package delayqtest runs a
// real server in-process for your tests.
package client
