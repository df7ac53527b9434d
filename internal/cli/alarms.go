package cli

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/delayq/delayq/api"
)

// alarmCmd is `delayq alarm ...`: webhook alarms.
type alarmCmd struct {
	Set    alarmSetCmd    `cmd:"" help:"Create or replace an alarm: POST events to a URL when a condition holds for a topic."`
	List   alarmListCmd   `cmd:"" help:"List alarms with their state."`
	Get    alarmGetCmd    `cmd:"" help:"Show an alarm with its state per topic and condition."`
	Delete alarmDeleteCmd `cmd:"" help:"Delete an alarm (a firing one sends no resolved event)."`
}

// alarmSetCmd is `delayq alarm set NAME --url URL --buried-over N ...`.
type alarmSetCmd struct {
	clientFlags
	outputFlags
	Name               string            `arg:"" help:"Alarm name: letters, digits and _.-."`
	URL                string            `name:"url" required:"" help:"http(s) URL the events are POSTed to."`
	Topics             []string          `name:"topic" help:"Topic glob to watch (*, ?, [a-z]); repeatable. Default: every topic."`
	BuriedOver         *int              `help:"Holds while a topic has more buried jobs than this."`
	OldestReadyOver    *time.Duration    `help:"Holds while a topic's oldest ready job has waited longer than this."`
	LatenessP99Over    *time.Duration    `name:"lateness-p99-over" help:"Holds while the p99 of a topic's fire lateness over the last minute is above this."`
	FailuresPerMinOver *float64          `help:"Holds while a topic's TTR expiries, releases and buries over the last minute are more than this."`
	Repeat             time.Duration     `help:"Send the firing event again this often while it holds (0: never)."`
	Format             string            `name:"format" enum:"delayq,alertmanager,slack" default:"delayq" help:"Payload: delayq, alertmanager (Alertmanager's webhook payload) or slack (incoming webhook)."`
	Secret             string            `name:"secret" env:"DELAYQ_ALARM_SECRET" help:"Sign every event with this secret (X-Delayq-Signature; see docs/alarms.md). ******** keeps the stored one."`
	Headers            map[string]string `name:"header" help:"Header sent with every event, NAME=VALUE; repeatable."`
}

// Run creates or replaces the alarm and prints it.
func (c *alarmSetCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	r := api.AlarmRequest{URL: c.URL, Topics: c.Topics, Format: c.Format, Secret: c.Secret, Headers: c.Headers}
	r.When.BuriedOver = c.BuriedOver
	r.When.FailuresPerMinOver = c.FailuresPerMinOver
	if c.OldestReadyOver != nil {
		r.When.OldestReadyOver = ptr(api.Duration(*c.OldestReadyOver))
	}
	if c.LatenessP99Over != nil {
		r.When.LatenessP99Over = ptr(api.Duration(*c.LatenessP99Over))
	}
	if c.Repeat != 0 {
		r.Repeat = ptr(api.Duration(c.Repeat))
	}
	a, err := cl.PutAlarm(e.ctx, c.Name, r)
	if err != nil {
		return err
	}
	return printAlarm(e, c.JSON, a)
}

// alarmListCmd is `delayq alarm list`.
type alarmListCmd struct {
	clientFlags
	outputFlags
}

// Run prints one line per alarm.
func (c *alarmListCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	all, err := cl.ListAlarms(e.ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, api.AlarmsResponse{Alarms: all})
	}
	if len(all) == 0 {
		fmt.Fprintln(e.stdout, "no alarms")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tTOPICS\tWHEN\tREPEAT\tURL")
	for _, a := range all {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", a.Name, a.State, topicsText(a.Topics), whenText(a.When), repeatText(a.Repeat), a.URL)
	}
	return tw.Flush()
}

// alarmGetCmd is `delayq alarm get NAME`.
type alarmGetCmd struct {
	clientFlags
	outputFlags
	Name string `arg:"" help:"Alarm name."`
}

// Run prints the alarm with its state.
func (c *alarmGetCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	a, err := cl.GetAlarm(e.ctx, c.Name)
	if err != nil {
		return err
	}
	return printAlarm(e, c.JSON, a)
}

// alarmDeleteCmd is `delayq alarm delete NAME`.
type alarmDeleteCmd struct {
	clientFlags
	Name string `arg:"" help:"Alarm name."`
}

// Run deletes the alarm.
func (c *alarmDeleteCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	if err := cl.DeleteAlarm(e.ctx, c.Name); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "deleted alarm %s\n", c.Name)
	return nil
}

func topicsText(ts []string) string {
	if len(ts) == 0 {
		return "*"
	}
	return strings.Join(ts, ",")
}

func repeatText(d *api.Duration) string {
	if d == nil {
		return "-"
	}
	return time.Duration(*d).String()
}

// whenText is an alarm's conditions as "buried_over=3 oldest_ready_over=5m0s".
func whenText(w api.AlarmWhen) string {
	var parts []string
	if w.BuriedOver != nil {
		parts = append(parts, fmt.Sprintf("buried_over=%d", *w.BuriedOver))
	}
	if w.OldestReadyOver != nil {
		parts = append(parts, "oldest_ready_over="+time.Duration(*w.OldestReadyOver).String())
	}
	if w.LatenessP99Over != nil {
		parts = append(parts, "lateness_p99_over="+time.Duration(*w.LatenessP99Over).String())
	}
	if w.FailuresPerMinOver != nil {
		parts = append(parts, fmt.Sprintf("failures_per_min_over=%g", *w.FailuresPerMinOver))
	}
	return strings.Join(parts, " ")
}

func printAlarm(e *env, asJSON bool, a *api.Alarm) error {
	if asJSON {
		return printJSON(e.stdout, a)
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "name\t%s\nstate\t%s\nurl\t%s\ntopics\t%s\nwhen\t%s\nrepeat\t%s\n",
		a.Name, a.State, a.URL, topicsText(a.Topics), whenText(a.When), repeatText(a.Repeat))
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(a.Conditions) == 0 {
		return nil
	}
	fmt.Fprintln(e.stdout)
	tw = tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TOPIC\tCONDITION\tVALUE\tTHRESHOLD\tSTATE\tSINCE")
	for _, c := range a.Conditions {
		state, since := "ok", "-"
		if c.Firing {
			state = "firing"
			if c.Since != nil {
				since = c.Since.UTC().Format(time.RFC3339)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%g\t%g\t%s\t%s\n", c.Topic, c.Condition, c.Value, c.Threshold, state, since)
	}
	return tw.Flush()
}

func ptr[T any](v T) *T { return &v }
