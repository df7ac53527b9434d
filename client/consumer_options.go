package client

import (
	"log/slog"
	"time"
)

// ConsumerOption configures a Consumer. Every Option (client settings) is
// also a ConsumerOption.
type ConsumerOption interface {
	applyConsumer(*consumerConfig)
}

// consumerConfig collects a Consumer's options.
type consumerConfig struct {
	clientOpts  []Option
	client      *Client
	topics      []string
	concurrency int
	wait        time.Duration
	margin      time.Duration
	grace       time.Duration
	backoff     Backoff
	autoTouch   bool
	touchLimit  time.Duration
	log         *slog.Logger
	hooks       Hooks
	// finishWindow and finishMax tune finish batching (see finisher);
	// tests set them to make batches deterministic.
	finishWindow time.Duration
	finishMax    int
}

type consumerOption func(*consumerConfig)

func (f consumerOption) applyConsumer(c *consumerConfig) { f(c) }

// Concurrency is how many handlers run at once. Default 1.
func Concurrency(n int) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.concurrency = max(n, 1) })
}

// Topics adds topics to consume from, besides the one given to
// NewConsumer. A reserve takes jobs from any of them.
func Topics(topics ...string) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.topics = append(c.topics, topics...) })
}

// Wait is how long one reserve long-polls the server when nothing is
// ready. Default 30 s; the server caps it (5 minutes by default).
func Wait(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.wait = d })
}

// SafetyMargin is how long before the job's TTR runs out the handler's
// context ends, leaving time to report the result. Default a tenth of the
// TTR, between 100 ms and 5 s; never more than half the TTR.
func SafetyMargin(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.margin = d })
}

// Grace is how long Consume lets running handlers finish after its context
// is cancelled; then their contexts are cancelled (cause ErrShutdown) and
// their jobs released. Default 30 s.
func Grace(d time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.grace = d })
}

// RetryBackoff sets the delay before a failed job runs again, from its
// attempt number (1 after the first failure). Default DefaultBackoff.
func RetryBackoff(b Backoff) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.backoff = b })
}

// AutoTouch makes the consumer touch a running job each time half its TTR
// has passed, so a handler may run longer than its TTR, for at most limit
// in all (0 = as long as it runs). Without it, j.Touch is the handler's to
// call.
func AutoTouch(limit time.Duration) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.autoTouch, c.touchLimit = true, limit })
}

// WithHooks sets callbacks on job start, finish and failure.
func WithHooks(h Hooks) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.hooks = h })
}

// UseClient makes the consumer use c instead of building its own client;
// client Options given to NewConsumer are then ignored.
func UseClient(cl *Client) ConsumerOption {
	return consumerOption(func(c *consumerConfig) { c.client = cl })
}
