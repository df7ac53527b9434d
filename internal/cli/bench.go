package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/bench"
)

// benchCmd is `delayq bench`: one bounded measurement of any server that
// speaks delayq's HTTP API or the beanstalkd protocol, so delayq and
// beanstalkd are measured by the same client in the same run.
type benchCmd struct {
	Target    string        `arg:"" help:"http://host:port (delayq HTTP API) or beanstalk://host:port (any beanstalkd-protocol server)."`
	Mode      string        `default:"put" enum:"put,reserve,burst,spread" help:"put, reserve (reserve+delete of preloaded jobs), burst (N jobs due at one instant), spread (--rate jobs/s due over --duration)."`
	N         int           `short:"n" default:"10000" help:"Jobs (put, reserve, burst)."`
	C         int           `short:"c" default:"1" help:"Concurrent connections."`
	Body      int           `default:"8" help:"Body size in bytes (lateness modes need at least 20)."`
	Batch     int           `default:"1" help:"Jobs per HTTP batch put (1 = single puts; beanstalkd has no batches)."`
	Take      int           `default:"1" help:"Jobs per HTTP reserve (its n); the jobs of one reserve are finished with one batch finish. beanstalkd reserves one at a time."`
	Rate      int           `help:"Jobs per second due (spread)."`
	Duration  time.Duration `help:"Span of the due times (spread)."`
	Lead      time.Duration `default:"3s" help:"Time from the start to the first due time (burst, spread); puts must finish within it."`
	Timeout   time.Duration `default:"2m" help:"Hard bound on the whole run."`
	PID       int           `help:"Sample this process's RSS (the server's PID)."`
	Delay     time.Duration `help:"put: make jobs due this far ahead (far-future load). spread: put each job during the run, due this long after it is sent."`
	Producers int           `default:"8" help:"spread with --delay: connections that put while the consumers take."`
	Spread    time.Duration `help:"put: spread due times uniformly over this span after --delay."`
	Topics    int           `default:"1" help:"Spread the jobs round-robin over this many topics (<topic>-0 … <topic>-<N-1>; at most 1000); every reserve takes from all of them (beanstalkd: the connection watches each tube). On a Redis Cluster a topic lives on one master, so more topics spread the load over the masters."`
	OwnTopic  bool          `help:"reserve with --topics: each connection reserves from one topic (connection i from topic i mod N) instead of all of them."`
	Topic     string        `help:"Topic (tube) of the run, or the prefix of its topics with --topics; default a fresh bench-<unix ns> each run."`
	LineOnly  bool          `name:"line" help:"Print only the one-line key=value result."`
}

// Run performs the measurement and prints a result line and a table.
func (c *benchCmd) Run(e *env) error {
	if c.Batch > 1 && strings.HasPrefix(c.Target, "beanstalk") {
		return usageError{msg: "--batch works only over HTTP: the beanstalkd protocol has no batch put"}
	}
	if c.Take > 1 && strings.HasPrefix(c.Target, "beanstalk") {
		return usageError{msg: "--take works only over HTTP: the beanstalkd protocol reserves one job per command"}
	}
	if c.Topics < 1 || c.Topics > bench.MaxTopics {
		return usageError{msg: fmt.Sprintf("--topics must be 1 to %d, not %d", bench.MaxTopics, c.Topics)}
	}
	res, err := bench.Run(e.ctx, bench.Options{
		Target: c.Target, Mode: c.Mode, N: c.N, C: c.C, BodySize: c.Body, Batch: c.Batch, Take: c.Take,
		Rate: c.Rate, Duration: c.Duration, Lead: c.Lead, Timeout: c.Timeout, PID: c.PID, Delay: c.Delay, Spread: c.Spread,
		Producers: c.Producers, Topic: c.Topic, Topics: c.Topics, OwnTopic: c.OwnTopic,
	})
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, res.Line())
	if !c.LineOnly {
		res.Table(e.stdout)
	}
	return nil
}
