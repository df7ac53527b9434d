package cli

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// scheduleCmd is `delayq schedule ...`: periodic jobs.
type scheduleCmd struct {
	Add    scheduleAddCmd    `cmd:"" help:"Create or replace a schedule: one job into a topic at each tick of a cron spec or interval."`
	List   scheduleListCmd   `cmd:"" help:"List schedules with their next fire time."`
	Get    scheduleGetCmd    `cmd:"" help:"Show a schedule with its next 5 fire times and its last tick."`
	Delete scheduleDeleteCmd `cmd:"" help:"Delete a schedule (the jobs it already put stay)."`
	Pause  schedulePauseCmd  `cmd:"" help:"Stop a schedule from firing until it is resumed."`
	Resume scheduleResumeCmd `cmd:"" help:"Let a paused schedule fire again, from now on."`
}

// scheduleAddCmd is `delayq schedule add NAME --topic T --cron SPEC|--every D`.
type scheduleAddCmd struct {
	clientFlags
	outputFlags
	Name  string `arg:"" help:"Schedule name: letters, digits and _.- (the job of each tick gets the id NAME:UNIX_MS)."`
	Topic string `required:"" help:"Topic each tick's job goes into."`
	// One of Cron and Every is needed: Run says so (kong's required on
	// both would print both as required in the usage line).
	Cron        string        `xor:"timing" help:"Cron spec, seconds optional (\"0 */5 * * * *\"), or @hourly, @daily, @every 90s, ...; this or --every."`
	Every       time.Duration `xor:"timing" help:"Fixed interval (at least 100ms); this or --cron."`
	Body        string        `help:"Body of each job."`
	TTR         time.Duration `name:"ttr" help:"Time a consumer may hold each job (server default 60s)."`
	Priority    *uint32       `help:"Priority of each job, lower first (server default 1024)."`
	MaxAttempts int           `help:"Reserves allowed before a job is buried (0 = unlimited)."`
	Timezone    string        `help:"IANA time zone the cron fields are read in (default UTC), e.g. Europe/Berlin."`
	Missed      string        `enum:"skip,one,all," default:"" help:"Ticks missed while no server ran: skip (default), one (the latest) or all (each, at most 1,000)."`
}

// Run creates or replaces the schedule and prints it.
func (c *scheduleAddCmd) Run(e *env) error {
	if c.Cron == "" && c.Every == 0 {
		return usageError{msg: "give the schedule's timing: --cron SPEC or --every DURATION (one of them)"}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	s, err := cl.PutSchedule(e.ctx, c.Name, client.ScheduleRequest{
		Topic: c.Topic, Cron: c.Cron, Every: c.Every, Body: []byte(c.Body), TTR: c.TTR,
		Priority: c.Priority, MaxAttempts: c.MaxAttempts, Timezone: c.Timezone, Missed: c.Missed,
	})
	if err != nil {
		return err
	}
	return printSchedule(e, c.JSON, s)
}

// scheduleListCmd is `delayq schedule list`.
type scheduleListCmd struct {
	clientFlags
	outputFlags
}

// Run prints one line per schedule.
func (c *scheduleListCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	all, err := cl.Schedules(e.ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		out := make([]api.Schedule, 0, len(all))
		for _, s := range all {
			out = append(out, toScheduleJSON(s))
		}
		return printJSON(e.stdout, map[string]any{"schedules": out})
	}
	if len(all) == 0 {
		fmt.Fprintln(e.stdout, "no schedules")
		return nil
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTOPIC\tCRON\tTIMEZONE\tPAUSED\tNEXT\tLAST")
	for _, s := range all {
		next, last := "-", "-"
		if len(s.Next) > 0 && !s.Paused {
			next = s.Next[0].UTC().Format(time.RFC3339) + " (" + ago(s.Next[0], now) + ")"
		}
		if !s.Last.IsZero() {
			last = s.Last.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.Name, s.Topic, s.Cron, s.Timezone, yesNo(s.Paused), next, last)
	}
	return tw.Flush()
}

// scheduleNameCmd is a schedule command that takes just a name.
type scheduleNameCmd struct {
	clientFlags
	outputFlags
	Name string `arg:"" help:"Schedule name."`
}

// call runs fn with a client and prints the schedule it answers.
func (c *scheduleNameCmd) call(e *env, fn func(cl *client.Client) (*client.Schedule, error)) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	s, err := fn(cl)
	if err != nil {
		return err
	}
	return printSchedule(e, c.JSON, s)
}

// scheduleGetCmd is `delayq schedule get NAME`.
type scheduleGetCmd struct{ scheduleNameCmd }

// Run prints the schedule.
func (c *scheduleGetCmd) Run(e *env) error {
	return c.call(e, func(cl *client.Client) (*client.Schedule, error) { return cl.Schedule(e.ctx, c.Name) })
}

// schedulePauseCmd is `delayq schedule pause NAME`.
type schedulePauseCmd struct{ scheduleNameCmd }

// Run pauses the schedule and prints it.
func (c *schedulePauseCmd) Run(e *env) error {
	return c.call(e, func(cl *client.Client) (*client.Schedule, error) { return cl.PauseSchedule(e.ctx, c.Name) })
}

// scheduleResumeCmd is `delayq schedule resume NAME`.
type scheduleResumeCmd struct{ scheduleNameCmd }

// Run resumes the schedule and prints it.
func (c *scheduleResumeCmd) Run(e *env) error {
	return c.call(e, func(cl *client.Client) (*client.Schedule, error) { return cl.ResumeSchedule(e.ctx, c.Name) })
}

// scheduleDeleteCmd is `delayq schedule delete NAME`.
type scheduleDeleteCmd struct {
	clientFlags
	Name string `arg:"" help:"Schedule name."`
}

// Run deletes the schedule.
func (c *scheduleDeleteCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if err := cl.DeleteSchedule(e.ctx, c.Name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted schedule %s\n", c.Name)
	return nil
}

// toScheduleJSON is a schedule in --json output: the HTTP API's own
// wire form (api.Schedule), so scripts read the same fields either way.
func toScheduleJSON(s *client.Schedule) api.Schedule {
	j := api.Schedule{
		Name: s.Name, Topic: s.Topic, Cron: s.Cron, Timezone: s.Timezone, Missed: s.Missed,
		TTR: s.TTR.Seconds(), Priority: s.Priority, MaxAttempts: s.MaxAttempts, Paused: s.Paused,
		Created: api.Time{Time: s.Created}, Updated: api.Time{Time: s.Updated}, Next: []api.Time{},
	}
	j.Body, j.BodyBase64 = api.EncodeBody(s.Body)
	for _, t := range s.Next {
		j.Next = append(j.Next, api.Time{Time: t})
	}
	if !s.Last.IsZero() {
		j.Last = &api.Time{Time: s.Last}
	}
	return j
}

func printSchedule(e *env, asJSON bool, s *client.Schedule) error {
	if asJSON {
		return printJSON(e.stdout, toScheduleJSON(s))
	}
	now := time.Now()
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\ntopic\t%s\ncron\t%s\ntimezone\t%s\nmissed\t%s\npaused\t%s\n",
		s.Name, s.Topic, s.Cron, s.Timezone, s.Missed, yesNo(s.Paused))
	fmt.Fprintf(tw, "ttr\t%s\npriority\t%d\nmax attempts\t%d\n", s.TTR, s.Priority, s.MaxAttempts)
	if s.Last.IsZero() {
		fmt.Fprintln(tw, "last\t-")
	} else {
		fmt.Fprintf(tw, "last\t%s (%s)\n", s.Last.UTC().Format(time.RFC3339Nano), ago(s.Last, now))
	}
	for i, t := range s.Next {
		label := ""
		if i == 0 {
			label = "next"
		}
		fmt.Fprintf(tw, "%s\t%s (%s)\n", label, t.UTC().Format(time.RFC3339Nano), ago(t, now))
	}
	return tw.Flush()
}
