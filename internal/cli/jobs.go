package cli

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// putCmd is `delayq put TOPIC BODY`.
type putCmd struct {
	clientFlags
	outputFlags
	Topic       string        `arg:"" help:"Topic to put the job into."`
	Body        string        `arg:"" help:"Job body."`
	ID          string        `help:"Job id (default: chosen by the server). Advice: topic plus business id."`
	Delay       time.Duration `xor:"when" help:"Make the job ready after this long (e.g. 30m)."`
	At          time.Time     `xor:"when" help:"Make the job ready at this RFC 3339 time."`
	TTR         time.Duration `name:"ttr" help:"Time a consumer may hold the job (server default 60s)."`
	Priority    *uint32       `help:"Priority, lower first (server default 1024)."`
	MaxAttempts int           `help:"Reserves allowed before the job is buried (0 = unlimited)."`
}

// Run puts the job and prints its id and seq.
func (c *putCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	res, err := cl.Put(e.ctx, c.Topic, client.PutRequest{
		ID: c.ID, Body: []byte(c.Body), Delay: c.Delay, At: c.At,
		TTR: c.TTR, Priority: c.Priority, MaxAttempts: c.MaxAttempts,
	})
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, res)
	}
	fmt.Fprintf(e.stdout, "put job %s (seq %d) into topic %s\n", res.ID, res.Seq, c.Topic)
	return nil
}

// reserveCmd is `delayq reserve TOPIC...`.
type reserveCmd struct {
	clientFlags
	outputFlags
	Topics []string      `arg:"" name:"topic" help:"Topics to reserve from."`
	N      int           `name:"n" default:"1" help:"Most jobs to reserve."`
	Wait   time.Duration `help:"How long to wait for a job to become ready (0: do not wait)."`
}

// Run reserves and prints each job with its reservation, which finish
// needs.
func (c *reserveCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	jobs, err := cl.Reserve(e.ctx, c.Topics, c.N, c.Wait)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, api.JobsResponse{Jobs: api.FromJobs(jobs)})
	}
	if len(jobs) == 0 {
		fmt.Fprintln(e.stdout, "no job ready")
		return nil
	}
	now := time.Now()
	for i, j := range jobs {
		if i > 0 {
			fmt.Fprintln(e.stdout)
		}
		printJob(e.stdout, j, now)
	}
	return nil
}

// finishCmd is `delayq finish ID:RESERVATION...` or
// `delayq finish ID --reservation R`.
type finishCmd struct {
	clientFlags
	Jobs        []string `arg:"" name:"job" help:"Jobs to finish, each as ID:RESERVATION (the id and the reservation printed by reserve); or one ID with --reservation. Several go in one call."`
	Reservation string   `help:"Reservation token of the one job given by ID."`
}

// Run finishes the jobs, in one batch call when there are pairs, and
// reports each; it fails when any could not be finished.
func (c *finishCmd) Run(e *env) error {
	refs, err := c.refs()
	if err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if c.Reservation != "" {
		if err := cl.Finish(e.ctx, refs[0].ID, refs[0].Reservation); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "finished job %s\n", refs[0].ID)
		return nil
	}
	errs, err := cl.FinishBatch(e.ctx, refs)
	if err != nil {
		return err
	}
	failed := 0
	for i, err := range errs {
		if err != nil {
			failed++
			fmt.Fprintf(e.stderr, "delayq finish: %v\n", err)
			continue
		}
		fmt.Fprintf(e.stdout, "finished job %s\n", refs[i].ID)
	}
	if failed > 0 {
		return fmt.Errorf("%s of %d not finished", plural(failed, "job", "jobs"), len(refs))
	}
	return nil
}

// refs reads the command line's jobs: ID:RESERVATION pairs, split at the
// last ':' (ids may hold ':', reservations do not), or one ID with
// --reservation.
func (c *finishCmd) refs() ([]client.FinishRef, error) {
	if c.Reservation != "" {
		if len(c.Jobs) != 1 {
			return nil, usageError{msg: "--reservation goes with exactly one job ID"}
		}
		return []client.FinishRef{{ID: c.Jobs[0], Reservation: c.Reservation}}, nil
	}
	refs := make([]client.FinishRef, len(c.Jobs))
	for i, arg := range c.Jobs {
		k := strings.LastIndexByte(arg, ':')
		if k <= 0 || k == len(arg)-1 {
			return nil, usageError{msg: fmt.Sprintf("%q is not ID:RESERVATION (or give one ID with --reservation)", arg)}
		}
		refs[i] = client.FinishRef{ID: arg[:k], Reservation: arg[k+1:]}
	}
	return refs, nil
}

// deleteCmd is `delayq delete ID`.
type deleteCmd struct {
	clientFlags
	ID string `arg:"" help:"Job id."`
}

// Run deletes the job whatever its state.
func (c *deleteCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if err := cl.Delete(e.ctx, c.ID); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted job %s\n", c.ID)
	return nil
}

// getCmd is `delayq get ID`.
type getCmd struct {
	clientFlags
	outputFlags
	ID string `arg:"" help:"Job id."`
}

// Run prints the job.
func (c *getCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	j, err := cl.Get(e.ctx, c.ID)
	if err != nil {
		return err
	}
	return c.printOne(e.stdout, j)
}

// printOne writes one job as --json asks: the API's JSON, or aligned
// "field  value" lines.
func (o outputFlags) printOne(w io.Writer, j *delayq.Job) error {
	if o.JSON {
		return printJSON(w, api.FromJob(j))
	}
	printJob(w, j, time.Now())
	return nil
}

// kickCmd is `delayq kick TOPIC [-n N] [--delayed]` or `delayq kick --id
// ID`. A topic kick retries buried jobs only; firing delayed jobs early
// is the explicit --delayed, so "retry what failed" never runs a job
// meant for later.
type kickCmd struct {
	clientFlags
	Topic   string `arg:"" optional:"" help:"Topic whose buried jobs to retry (with --delayed: whose delayed jobs to fire early)."`
	N       int    `name:"n" short:"n" default:"1" help:"Most jobs to kick from the topic."`
	Delayed bool   `help:"Fire the topic's delayed jobs early (earliest due first) instead of retrying buried ones."`
	ID      string `help:"Kick this one buried or delayed job instead of a topic."`
}

// Run kicks the topic's jobs or the one job.
func (c *kickCmd) Run(e *env) error {
	if (c.Topic == "") == (c.ID == "") {
		return usageError{msg: "give either a TOPIC or --id ID"}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	if c.ID != "" {
		if c.Delayed {
			return usageError{msg: "--delayed applies to a TOPIC, not to --id (which kicks the job whatever it is)"}
		}
		if _, err := cl.KickJob(e.ctx, c.ID); err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "kicked job %s\n", c.ID)
		return nil
	}
	if c.Delayed {
		n, err := cl.KickDelayed(e.ctx, c.Topic, c.N)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.stdout, "fired %s early\n", plural(n, "delayed job", "delayed jobs"))
		return nil
	}
	r, err := cl.KickReport(e.ctx, c.Topic, c.N)
	if err != nil {
		return err
	}
	what := plural(r.Kicked, "job", "jobs")
	if r.State != "" {
		what = plural(r.Kicked, r.State+" job", r.State+" jobs")
	}
	fmt.Fprintf(e.stdout, "kicked %s in topic %s\n", what, c.Topic)
	return nil
}

// printJob writes one job as aligned "field  value" lines.
func printJob(w io.Writer, j *delayq.Job, now time.Time) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
	row("id", j.ID)
	row("seq", strconv.FormatUint(j.Seq, 10))
	row("topic", j.Topic)
	row("state", string(j.State))
	row("priority", strconv.FormatUint(uint64(j.Priority), 10))
	row("ttr", j.TTR.String())
	attempts := strconv.Itoa(j.Attempts)
	if j.MaxAttempts > 0 {
		attempts += " of " + strconv.Itoa(j.MaxAttempts)
	}
	row("attempts", attempts)
	row("counts", fmt.Sprintf("%d timeouts, %d releases, %d buries, %d kicks", j.Timeouts, j.Releases, j.Buries, j.Kicks))
	if !j.LastFailed.IsZero() {
		row("failed", lastFailure(j, now, delayq.MaxReasonLen))
	}
	row("due", j.Due.UTC().Format(api.TimeLayout)+" ("+ago(j.Due, now)+")")
	row("created", j.Created.UTC().Format(api.TimeLayout))
	if j.Reservation != "" {
		row("reservation", j.Reservation)
		row("deadline", j.Deadline.UTC().Format(api.TimeLayout)+" ("+ago(j.Deadline, now)+")")
	}
	if !j.Ended.IsZero() {
		row("ended", j.Ended.UTC().Format(api.TimeLayout)+" ("+ago(j.Ended, now)+")")
	}
	switch {
	case j.State.Retained() && len(j.Body) == 0:
		row("body", "(not kept, or empty)")
	case utf8.Valid(j.Body):
		row("body", strconv.Quote(string(j.Body)))
	default:
		row("body", fmt.Sprintf("%d bytes, not UTF-8", len(j.Body)))
	}
	tw.Flush()
	printAttempts(w, j, now)
}

// printAttempts writes a job's attempts, oldest first, one line each:
// number, when reserved, by whom, how it ended and why.
func printAttempts(w io.Writer, j *delayq.Job, now time.Time) {
	if len(j.History) == 0 {
		return
	}
	fmt.Fprintln(w, "\nattempts:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tRESERVED\tBY\tENDED\tOUTCOME\tREASON")
	for _, a := range j.History {
		ended, outcome, reason := "-", "(running)", "-"
		if a.Outcome != "" {
			ended, outcome = a.Ended.UTC().Format(api.TimeLayout), string(a.Outcome)
		}
		if a.Reason != "" {
			reason = strconv.Quote(a.Reason)
		}
		fmt.Fprintf(tw, "  %d\t%s (%s)\t%s\t%s\t%s\t%s\n", a.N, a.Reserved.UTC().Format(api.TimeLayout), ago(a.Reserved, now), a.By, ended, outcome, reason)
	}
	tw.Flush()
}
