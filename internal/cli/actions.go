package cli

import (
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// heldFlags name a job a consumer holds: its id and the reservation token
// that reserve printed.
type heldFlags struct {
	ID          string `arg:"" help:"Job id."`
	Reservation string `required:"" help:"Reservation token printed by reserve."`
}

// releaseCmd is `delayq release ID --reservation R [--delay D] [--priority P] [--reason TEXT]`.
type releaseCmd struct {
	clientFlags
	heldFlags
	Delay    time.Duration `help:"Make the job ready again after this long (default: at once)."`
	Priority *uint32       `help:"New priority (default: keep it)."`
	Reason   string        `help:"Why the job failed; kept as its last reason (at most 1024 bytes)."`
}

// Run gives the job back, ready now or delayed.
func (c *releaseCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	j, err := cl.Release(e.ctx, c.ID, c.Reservation, c.Delay, c.Priority, client.WithReason(c.Reason))
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "released job %s: %s, due %s\n", j.ID, j.State, ago(j.Due, time.Now()))
	return nil
}

// touchCmd is `delayq touch ID --reservation R`.
type touchCmd struct {
	clientFlags
	heldFlags
}

// Run restarts the job's TTR.
func (c *touchCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	j, err := cl.Touch(e.ctx, c.ID, c.Reservation)
	if err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "touched job %s: deadline %s\n", j.ID, ago(j.Deadline, time.Now()))
	return nil
}

// buryCmd is `delayq bury ID --reservation R [--priority P] [--reason TEXT]`.
type buryCmd struct {
	clientFlags
	heldFlags
	Priority *uint32 `help:"New priority (default: keep it)."`
	Reason   string  `help:"Why the job failed; kept as its last reason (at most 1024 bytes)."`
}

// Run sets the job aside until an operator kicks it.
func (c *buryCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if _, err := cl.Bury(e.ctx, c.ID, c.Reservation, c.Priority, client.WithReason(c.Reason)); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "buried job %s\n", c.ID)
	return nil
}

// updateCmd is `delayq update ID [--delay D | --at T] [--body B] [--priority P]`.
type updateCmd struct {
	clientFlags
	outputFlags
	ID       string         `arg:"" help:"Job id."`
	Delay    *time.Duration `xor:"when" help:"Make the job due this long from now."`
	At       *time.Time     `xor:"when" help:"Make the job due at this time (RFC 3339)."`
	Body     *string        `help:"New body."`
	Priority *uint32        `help:"New priority."`
}

// Run changes a job that is not reserved.
func (c *updateCmd) Run(e *env) error {
	if c.Delay == nil && c.At == nil && c.Body == nil && c.Priority == nil {
		return usageError{msg: "nothing to change: give --delay, --at, --body or --priority"}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	r := client.UpdateRequest{Delay: c.Delay, At: c.At, Priority: c.Priority}
	if c.Body != nil {
		r.Body = []byte(*c.Body)
	}
	j, err := cl.Update(e.ctx, c.ID, r)
	if err != nil {
		return err
	}
	return c.printOne(e.stdout, j)
}

// listCmd is `delayq list TOPIC [--state S] [--limit N] [--cursor C]`.
type listCmd struct {
	clientFlags
	outputFlags
	Topic  string `arg:"" help:"Topic to browse."`
	State  string `enum:",delayed,ready,reserved,buried,finished,deleted,failed" default:"" help:"Only jobs in this state: delayed, ready, reserved or buried (default: all four, in that order), or finished, deleted or failed (the jobs that ended within the server's --retain, by when they ended)."`
	Limit  int    `help:"Most jobs on the page (default: the server's)."`
	Cursor string `help:"Where to go on: the cursor the previous page printed."`
}

// Run prints one page of the topic's jobs, one line each, and the cursor
// of the next page.
func (c *listCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	jobs, next, err := cl.List(e.ctx, c.Topic, client.ListRequest{State: delayq.State(c.State), Cursor: c.Cursor, Limit: c.Limit})
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, api.JobsResponse{Jobs: api.FromJobs(jobs), Next: next})
	}
	if len(jobs) == 0 {
		fmt.Fprintln(e.stdout, "no jobs")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	if delayq.State(c.State).Retained() {
		// Ended jobs: when they ended says more than when they were due.
		fmt.Fprintln(tw, "ID\tSEQ\tSTATE\tATTEMPTS\tENDED\tLAST FAILURE")
		for _, j := range jobs {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%s\t%s\n", j.ID, j.Seq, j.State, j.Attempts, ago(j.Ended, now), lastFailure(j, now, 40))
		}
	} else {
		fmt.Fprintln(tw, "ID\tSEQ\tSTATE\tPRIORITY\tATTEMPTS\tDUE\tLAST FAILURE")
		for _, j := range jobs {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%s\t%s\n", j.ID, j.Seq, j.State, j.Priority, j.Attempts, ago(j.Due, now), lastFailure(j, now, 40))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if next != "" {
		fmt.Fprintf(e.stdout, "more: --cursor %s\n", next)
	}
	return nil
}

// lastFailure is a job's last reason and when, in one cell of at most
// width characters of reason ("-" while it never failed).
func lastFailure(j *delayq.Job, now time.Time, width int) string {
	if j.LastFailed.IsZero() {
		return "-"
	}
	reason := j.LastReason
	if reason == "" {
		reason = "(no reason given)"
	}
	if r := []rune(reason); len(r) > width {
		reason = string(r[:width-1]) + "…"
	}
	return strconv.Quote(reason) + " " + ago(j.LastFailed, now)
}
