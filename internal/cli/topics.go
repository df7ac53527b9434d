package cli

import (
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/delayq/delayq/api"
)

// topicsCmd is `delayq topics`.
type topicsCmd struct {
	clientFlags
	outputFlags
}

// Run prints one line per topic with its counts per state.
func (c *topicsCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	topics, err := cl.Topics(e.ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(e.stdout, api.TopicsResponse{Topics: topics})
	}
	if len(topics) == 0 {
		fmt.Fprintln(e.stdout, "no topics")
		return nil
	}
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "TOPIC\tDELAYED\tREADY\tRESERVED\tBURIED\tPAUSED\tOLDEST READY\t")
	for _, t := range topics {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\t\n", t.Name, t.Delayed, t.Ready, t.Reserved, t.Buried,
			yesNo(t.Paused), age(t.OldestReadyAge))
	}
	return tw.Flush()
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// age renders seconds as a rounded duration, "-" when nothing is ready.
func age(seconds float64) string {
	if seconds <= 0 {
		return "-"
	}
	return (time.Duration(seconds * float64(time.Second))).Round(time.Millisecond).String()
}

// statsCmd is `delayq stats`.
type statsCmd struct {
	clientFlags
	outputFlags
}

// stats is the summary `delayq stats` prints.
type stats struct {
	Server   string `json:"server"`
	Healthy  bool   `json:"healthy"`
	Error    string `json:"error,omitempty"`
	Topics   int    `json:"topics"`
	Delayed  int    `json:"delayed"`
	Ready    int    `json:"ready"`
	Reserved int    `json:"reserved"`
	Buried   int    `json:"buried"`
}

// Run prints the server's health and its job counts summed over topics.
// An unhealthy server makes the command fail after printing.
func (c *statsCmd) Run(e *env) error {
	cl, err := c.client()
	if err != nil {
		return err
	}
	s := stats{Server: strings.Join(c.Server, ","), Healthy: true}
	healthErr := cl.Health(e.ctx)
	if healthErr != nil {
		s.Healthy, s.Error = false, healthErr.Error()
	}
	topics, err := cl.Topics(e.ctx)
	if err != nil && healthErr == nil {
		return err
	}
	s.Topics = len(topics)
	for _, t := range topics {
		s.Delayed += t.Delayed
		s.Ready += t.Ready
		s.Reserved += t.Reserved
		s.Buried += t.Buried
	}
	if c.JSON {
		err = printJSON(e.stdout, s)
	} else {
		err = printStats(e, s)
	}
	if err == nil && healthErr != nil {
		err = fmt.Errorf("server unhealthy: %w", healthErr)
	}
	return err
}

func printStats(e *env, s stats) error {
	tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
	health := "healthy"
	if !s.Healthy {
		health = "unhealthy: " + s.Error
	}
	for _, r := range [][2]string{
		{"server", s.Server}, {"health", health}, {"topics", strconv.Itoa(s.Topics)},
		{"delayed", strconv.Itoa(s.Delayed)}, {"ready", strconv.Itoa(s.Ready)},
		{"reserved", strconv.Itoa(s.Reserved)}, {"buried", strconv.Itoa(s.Buried)},
		{"total", strconv.Itoa(s.Delayed + s.Ready + s.Reserved + s.Buried)},
	} {
		fmt.Fprintf(tw, "%s\t%s\n", r[0], r[1])
	}
	return tw.Flush()
}
