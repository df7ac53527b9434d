package client

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"time"
)

// Option configures a Client. Every Option is also a ConsumerOption, applied
// to the Client a consumer builds for itself.
type Option interface {
	applyClient(*clientConfig)
	applyConsumer(*consumerConfig)
}

// clientConfig collects a Client's options before it is built.
type clientConfig struct {
	hc          *http.Client
	maxAttempts int
	retryWait   time.Duration
	timeout     time.Duration
	discover    time.Duration
	log         *slog.Logger
	token       string      // security.go
	tls         *tls.Config // security.go
	err         error       // an option that failed (an unreadable CA file)
}

type clientOption func(*clientConfig)

func (f clientOption) applyClient(c *clientConfig) { f(c) }

func (f clientOption) applyConsumer(c *consumerConfig) {
	c.clientOpts = append(c.clientOpts, f)
}

// HTTPClient sets the *http.Client used for every call (TLS, proxies,
// transport tuning). Default http.DefaultClient. Its Timeout, if set, must
// exceed the consumer's long-poll wait.
func HTTPClient(hc *http.Client) Option {
	return clientOption(func(c *clientConfig) { c.hc = hc })
}

// CallAttempts bounds how many times one call is sent, across all addresses,
// before its error is returned. Default 4; 1 disables retries.
func CallAttempts(n int) Option {
	return clientOption(func(c *clientConfig) { c.maxAttempts = n })
}

// RetryWait is the base pause before going round every address again; it
// doubles per round, up to 2 s, with jitter. Default 50 ms.
func RetryWait(d time.Duration) Option {
	return clientOption(func(c *clientConfig) { c.retryWait = d })
}

// RequestTimeout bounds each attempt of a call; a reserve gets its wait on
// top. Default 30 s.
func RequestTimeout(d time.Duration) Option {
	return clientOption(func(c *clientConfig) { c.timeout = d })
}

// Discovery sets how often the client asks a server for the cluster's live
// members (GET /v1/cluster) and adds them to its addresses. Default one
// minute; 0 turns discovery off so only the given addresses are used.
func Discovery(every time.Duration) Option {
	return clientOption(func(c *clientConfig) { c.discover = every })
}

// loggerOption sets the logger of a client and of a consumer.
type loggerOption struct{ l *slog.Logger }

func (o loggerOption) applyClient(c *clientConfig) { c.log = o.l }
func (o loggerOption) applyConsumer(c *consumerConfig) {
	c.log = o.l
	c.clientOpts = append(c.clientOpts, o)
}

// Logger sets where the client and consumer log: retries at debug level,
// handler failures at warn, give-ups at error. Default: nothing is logged.
func Logger(l *slog.Logger) Option {
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	return loggerOption{l}
}
