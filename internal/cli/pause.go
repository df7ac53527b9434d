package cli

import (
	"fmt"
	"time"

	"github.com/delayq/delayq"
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

// purgeCmd is `delayq purge TOPIC --state S`.
type purgeCmd struct {
	clientFlags
	Topic string `arg:"" help:"Topic whose jobs to delete."`
	State string `required:"" enum:"ready,delayed,reserved,buried" help:"Delete the jobs in this state (ready, delayed, reserved or buried)."`
	Yes   bool   `help:"Do not ask; needed when stdin is not a terminal."`
}

// Run deletes the jobs after a confirmation (or --yes).
func (c *purgeCmd) Run(e *env) error {
	if !c.Yes {
		return usageError{fmt.Sprintf("purge deletes every %s job of %s and cannot be undone; add --yes to do it", c.State, c.Topic)}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	n, err := cl.Purge(e.ctx, c.Topic, delayq.State(c.State))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted %s from topic %s\n", plural(n, c.State+" job", c.State+" jobs"), c.Topic)
	return nil
}
