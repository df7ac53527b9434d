// Package bench measures a delay queue server from the outside: put
// throughput, reserve+delete throughput and firing lateness, over delayq's
// HTTP API or the beanstalkd protocol, so delayq and beanstalkd are measured
// by the same client in the same run. It backs `delayq bench`.
//
// Every run is bounded in jobs and in time (Options.Timeout) and talks only
// to the address it is given.
package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Modes of a run.
const (
	ModePut     = "put"     // put N jobs from C connections
	ModeReserve = "reserve" // preload N ready jobs, then reserve+delete them from C connections
	ModeBurst   = "burst"   // N jobs due at one instant; consumers long-poll; lateness
	ModeSpread  = "spread"  // Rate jobs/s due uniformly over Duration; lateness (with Delay: put during the run)
)

// Options describe one run.
type Options struct {
	// Target is "http://host:port" (delayq's HTTP API) or
	// "beanstalk://host:port" (any beanstalkd-protocol server).
	Target   string
	Mode     string
	N        int           // jobs (put, reserve, burst)
	C        int           // concurrent connections
	BodySize int           // bytes per body (at least 16 for lateness modes)
	Batch    int           // jobs per HTTP batch put (1 = single puts)
	Take     int           // jobs per HTTP reserve (its n); each is still finished on its own
	Rate     int           // jobs/s due (spread)
	Duration time.Duration // span of due times (spread)
	Lead     time.Duration // time from the start of the run to the first due time (burst, spread)
	Timeout  time.Duration // hard bound on the whole run
	// Delay and Spread make put-mode jobs delayed: each is due at
	// now+Delay+a random part of Spread (far-future load for memory tests).
	// A spread with a Delay puts its jobs during the run instead of before
	// it, each due Delay after it is sent (issue 8's "1 s delay").
	Delay, Spread time.Duration
	Producers     int    // connections putting during a spread with a Delay (default 8)
	PID           int    // when > 0, sample this process's RSS
	Topic         string // default: a fresh bench-<time> topic
	// Topics spreads the run's jobs round-robin over this many topics
	// (Topic-0 … Topic-<Topics-1>; 1, the default, is Topic itself), and
	// every reserve takes from all of them: on a Redis Cluster a topic's
	// keys live on one master, so one topic loads one master only.
	Topics int
	// OwnTopic makes each consuming connection of a reserve run take from
	// one topic only (connection i from topic i mod Topics) instead of all
	// of them: a one-topic reserve is one store call, where a reserve of
	// several topics must first look at each (on Redis, one read-only
	// script per topic), so the two cost the store differently.
	OwnTopic bool
}

// MaxTopics is the most topics one run may spread over: every reserve
// names them all, and a delayq server refuses a reserve of more than its
// --max-reserve-topics (default 1,000).
const MaxTopics = 1000

// topicNames is the run's topics in round-robin order.
func (o *Options) topicNames() []string {
	if o.Topics <= 1 {
		return []string{o.Topic}
	}
	names := make([]string, o.Topics)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", o.Topic, i)
	}
	return names
}

func (o *Options) defaults() error {
	if o.N <= 0 {
		o.N = 10000
	}
	if o.C <= 0 {
		o.C = 1
	}
	if o.Batch <= 0 {
		o.Batch = 1
	}
	if o.Take <= 0 {
		o.Take = 1
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Minute
	}
	if o.Producers <= 0 {
		o.Producers = 8
	}
	if o.Lead <= 0 {
		o.Lead = 3 * time.Second
	}
	if o.Topics <= 0 {
		o.Topics = 1
	}
	if o.Topics > MaxTopics {
		return fmt.Errorf("bench: --topics %d is more than %d", o.Topics, MaxTopics)
	}
	if o.OwnTopic && (o.Mode != ModeReserve || o.C < o.Topics) {
		// a topic no connection reserves from would never drain
		return fmt.Errorf("bench: --own-topic needs --mode reserve and at least one connection per topic (-c %d, --topics %d)", o.C, o.Topics)
	}
	if o.Topic == "" {
		o.Topic = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	}
	if o.Mode == ModeBurst || o.Mode == ModeSpread {
		o.BodySize = max(o.BodySize, stampSize)
	}
	if o.Mode == ModeSpread {
		if o.Rate <= 0 || o.Duration <= 0 {
			return errors.New("bench: spread needs --rate and --duration")
		}
		o.N = int(float64(o.Rate) * o.Duration.Seconds())
	}
	switch o.Mode {
	case ModePut, ModeReserve, ModeBurst, ModeSpread:
	default:
		return fmt.Errorf("bench: unknown mode %q (put, reserve, burst, spread)", o.Mode)
	}
	return nil
}

// Result is what a run measured.
type Result struct {
	Options  Options
	Protocol string
	Jobs     int           // jobs completed
	Elapsed  time.Duration // of the measured phase
	PerSec   float64
	// Latency of each call (put, reserve+delete) or lateness of each job
	// (burst, spread): now at receipt minus the due time asked for.
	P50, P99, P999, Max time.Duration
	Early               int           // jobs received before their due time (must be 0)
	Drain               time.Duration // burst: from the due instant to the last job received
	RSS                 int64         // bytes, max sampled (0 if no PID)
}

// Run performs one run.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	dial, proto, err := dialer(o.Target)
	if err != nil {
		return nil, err
	}
	rss := startRSS(ctx, o.PID)
	r := &runner{o: o, dial: dial, topics: o.topicNames()}
	res, err := r.run(ctx)
	if err != nil {
		return nil, err
	}
	res.Options, res.Protocol, res.RSS = o, proto, rss()
	return res, nil
}

func dialer(target string) (func() (driver, error), string, error) {
	u, err := url.Parse(target)
	if err != nil || u.Host == "" {
		return nil, "", fmt.Errorf("bench: target %q is not http://host:port or beanstalk://host:port", target)
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
		hd := newHTTPDriver(strings.TrimRight(target, "/"))
		return func() (driver, error) { return hd, nil }, "http", nil
	case "beanstalk", "beanstalkd", "tcp":
		return func() (driver, error) { return dialBeanstalk(u.Host) }, "beanstalk", nil
	}
	return nil, "", fmt.Errorf("bench: unknown scheme %q (http or beanstalk)", u.Scheme)
}

// driver is one connection's view of a server.
type driver interface {
	// put stores len(dues) jobs (one call; several only over HTTP batch).
	put(ctx context.Context, topic string, body []byte, dues []time.Time) error
	// reserve waits up to wait for one job; ok false when none came.
	// reserve returns up to n jobs from any of topics (none when wait ran
	// out).
	reserve(ctx context.Context, topics []string, n int, wait time.Duration) ([]job, error)
	// finish finishes jobs: over HTTP several in one batch finish.
	finish(ctx context.Context, jobs []job) error
	close() error
}

// job is a reserved job as a driver hands it out.
type job struct {
	id   string
	body []byte
}
