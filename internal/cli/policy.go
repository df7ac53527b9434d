package cli

import (
	"fmt"
	"strings"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// policyCmd is `delayq policy ...`: a topic's policy.
type policyCmd struct {
	Set    policySetCmd    `cmd:"" help:"Set (replace) a topic's policy: default ttr and max_attempts, retry backoff, max jobs."`
	Get    policyGetCmd    `cmd:"" help:"Show a topic's policy."`
	Delete policyDeleteCmd `cmd:"" help:"Remove a topic's policy (its jobs keep what they were put with)."`
}

// policySetCmd is `delayq policy set TOPIC [--ttr D] [--max-attempts N]
// [--backoff D [--backoff-max D] [--backoff-factor F] [--backoff-jitter F]] [--max-jobs N]`.
type policySetCmd struct {
	clientFlags
	outputFlags
	Topic         string        `arg:"" help:"Topic the policy is for."`
	TTR           time.Duration `name:"ttr" help:"ttr of jobs put without one."`
	MaxAttempts   int           `help:"max_attempts of jobs put without one (at least 1)."`
	Backoff       time.Duration `help:"Delay of the first retry of a job released without a delay or whose TTR ran out."`
	BackoffMax    time.Duration `help:"Longest retry delay (server default 1h)."`
	BackoffFactor float64       `help:"Growth of the delay per attempt, at least 1 (server default 2)."`
	BackoffJitter float64       `help:"Spread of each delay as a fraction of it, 0 to 1 (default 0)."`
	MaxJobs       int           `help:"Most live jobs the topic holds; puts beyond are refused (topic_full)."`
}

// Run sets the policy and prints it as the server keeps it.
func (c *policySetCmd) Run(e *env) error {
	switch {
	case c.TTR < 0 || c.Backoff < 0 || c.BackoffMax < 0:
		return usageError{"durations must not be negative"}
	case c.MaxAttempts < 0 || c.MaxJobs < 0:
		return usageError{"--max-attempts and --max-jobs must not be negative"}
	case c.Backoff == 0 && (c.BackoffMax != 0 || c.BackoffFactor != 0 || c.BackoffJitter != 0):
		return usageError{"--backoff-max, --backoff-factor and --backoff-jitter need --backoff (the first delay)"}
	}
	p := client.Policy{TTR: c.TTR, MaxAttempts: c.MaxAttempts, MaxJobs: c.MaxJobs}
	if c.Backoff != 0 {
		p.Backoff = &client.PolicyBackoff{Initial: c.Backoff, Max: c.BackoffMax, Factor: c.BackoffFactor, Jitter: c.BackoffJitter}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	got, err := cl.SetPolicy(e.ctx, c.Topic, p)
	if err != nil {
		return err
	}
	return printPolicy(e, c.JSON, c.Topic, got)
}

// policyGetCmd is `delayq policy get TOPIC`.
type policyGetCmd struct {
	clientFlags
	outputFlags
	Topic string `arg:"" help:"Topic whose policy to show."`
}

// Run prints the policy.
func (c *policyGetCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	p, err := cl.GetPolicy(e.ctx, c.Topic)
	if err != nil {
		return err
	}
	return printPolicy(e, c.JSON, c.Topic, p)
}

// policyDeleteCmd is `delayq policy delete TOPIC`.
type policyDeleteCmd struct {
	clientFlags
	Topic string `arg:"" help:"Topic whose policy to remove."`
}

// Run removes the policy.
func (c *policyDeleteCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if err := cl.DeletePolicy(e.ctx, c.Topic); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted the policy of topic %s\n", c.Topic)
	return nil
}

// printPolicy prints p as one line, or as the API's JSON.
func printPolicy(e *env, asJSON bool, topic string, p *client.Policy) error {
	if asJSON {
		w := api.Policy{Topic: topic, MaxAttempts: p.MaxAttempts, MaxJobs: p.MaxJobs}
		if p.TTR != 0 {
			d := api.Duration(p.TTR)
			w.TTR = &d
		}
		if b := p.Backoff; b != nil {
			w.Backoff = &api.Backoff{Initial: api.Duration(b.Initial), Max: api.Duration(b.Max), Factor: b.Factor, Jitter: b.Jitter}
		}
		return printJSON(e.stdout, w)
	}
	var parts []string
	if p.TTR != 0 {
		parts = append(parts, "ttr "+p.TTR.String())
	}
	if p.MaxAttempts != 0 {
		parts = append(parts, fmt.Sprintf("max_attempts %d", p.MaxAttempts))
	}
	if b := p.Backoff; b != nil {
		s := fmt.Sprintf("backoff %s ×%g up to %s", b.Initial, b.Factor, b.Max)
		if b.Jitter != 0 {
			s += fmt.Sprintf(" ±%g%%", b.Jitter*100)
		}
		parts = append(parts, s)
	}
	if p.MaxJobs != 0 {
		parts = append(parts, fmt.Sprintf("max_jobs %d", p.MaxJobs))
	}
	fmt.Fprintf(e.stdout, "topic %s: %s\n", topic, strings.Join(parts, ", "))
	return nil
}
