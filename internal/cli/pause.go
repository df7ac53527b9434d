package cli

import (
	"fmt"
	"time"
)

// pauseCmd is `delayq pause TOPIC [--for D]`.
type pauseCmd struct {
	clientFlags
	outputFlags
	Topic string        `arg:"" help:"Topic to pause."`
	For   time.Duration `help:"How long reserves skip the topic (default: until resumed)."`
}

// Run pauses the topic and says until when.
func (c *pauseCmd) Run(e *env) error {
	if c.For < 0 {
		return usageError{"--for must not be negative"}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	t, err := cl.PauseTopic(e.ctx, c.Topic, c.For)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, t)
	}
	if c.For > 0 {
		fmt.Fprintf(e.stdout, "paused topic %s for %s (%d ready)\n", c.Topic, c.For, t.Ready)
	} else {
		fmt.Fprintf(e.stdout, "paused topic %s until resumed (%d ready)\n", c.Topic, t.Ready)
	}
	return nil
}

// resumeCmd is `delayq resume TOPIC`.
type resumeCmd struct {
	clientFlags
	outputFlags
	Topic string `arg:"" help:"Topic to resume."`
}

// Run resumes the topic.
func (c *resumeCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	t, err := cl.ResumeTopic(e.ctx, c.Topic)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, t)
	}
	fmt.Fprintf(e.stdout, "resumed topic %s (%d ready)\n", c.Topic, t.Ready)
	return nil
}
