package beanstalk

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
)

// version is what stats reports as "version": the beanstalkd protocol
// version delayq speaks, so clients that check it enable what 1.12 has.
const version = "1.12"

// yamlList formats names as beanstalkd's list replies do.
func yamlList(names []string) []byte {
	var b strings.Builder
	b.WriteString("---\n")
	for _, n := range names {
		b.WriteString("- ")
		b.WriteString(n)
		b.WriteString("\n")
	}
	return []byte(b.String())
}

// yamlDoc formats key/value pairs as beanstalkd's stats replies do.
type yamlDoc struct{ b strings.Builder }

func newYAML() *yamlDoc {
	d := &yamlDoc{}
	d.b.WriteString("---\n")
	return d
}

func (d *yamlDoc) add(key string, value any) *yamlDoc {
	fmt.Fprintf(&d.b, "%s: %v\n", key, value)
	return d
}

func (d *yamlDoc) bytes() []byte { return []byte(d.b.String()) }

// roundUp is the most by which the engine rounds a due time, a
// reservation's deadline or a pause's end up to the store's millisecond.
// It is taken off the time left that stats report, so a delay or TTR of d
// seconds shows d-1 at once, as in beanstalkd, and not d.
const roundUp = time.Millisecond

// tubeNames lists every existing tube (see tubes.list).
func (s *Server) tubeNames(ctx context.Context) ([]string, error) {
	stored, err := s.Engine.Topics(ctx)
	if err != nil {
		return nil, err
	}
	return s.tubes.list(stored, time.Now()), nil
}

// unref is called when a connection stops using or watching name, or
// deletes a job of it: if nothing keeps the tube any more, it goes.
func (s *Server) unref(ctx context.Context, name string) {
	if _, referenced := s.tubes.snapshot(name); referenced {
		return
	}
	st, err := s.Engine.Topic(ctx, name)
	if err != nil {
		return // list-tubes drops it later
	}
	s.tubes.forget(name, st, time.Now())
}

// tubeStats returns a tube's store figures and whether the tube exists.
func (s *Server) tubeStats(ctx context.Context, name string) (delayq.TopicStats, bool, error) {
	st, err := s.Engine.Topic(ctx, name)
	if err != nil {
		return st, false, err
	}
	_, referenced := s.tubes.snapshot(name)
	return st, referenced || storeHas(st, time.Now()), nil
}

func (c *conn) cmdStatsJob(cmd *command) error {
	j, err := c.liveJob(c.ctx, cmd.id)
	if err != nil {
		return err
	}
	now := time.Now()
	var left time.Duration
	switch j.State {
	case delayq.StateReserved:
		left = j.Deadline.Sub(now) - roundUp
	case delayq.StateDelayed:
		left = j.Due.Sub(now) - roundUp
	}
	d := newYAML().add("id", j.Seq).add("tube", j.Topic).add("state", j.State).
		add("pri", j.Priority).add("age", int64(now.Sub(j.Created)/time.Second)).
		add("delay", int64(j.Delay/time.Second)).add("ttr", int64(j.TTR/time.Second)).
		add("time-left", int64(left/time.Second)).add("file", 0).
		add("reserves", j.Attempts).add("timeouts", j.Timeouts).add("releases", j.Releases).
		add("buries", j.Buries).add("kicks", j.Kicks)
	c.writeData(d.bytes())
	return nil
}

func (c *conn) cmdStatsTube(cmd *command) error {
	st, ok, err := c.srv.tubeStats(c.ctx, cmd.tube)
	if err != nil {
		return err
	}
	if !ok {
		return errNotFound
	}
	t, _ := c.srv.tubes.snapshot(cmd.tube)
	now := time.Now()
	var pause, left time.Duration
	if st.PausedUntil.After(now) {
		left = max(st.PausedUntil.Sub(now)-roundUp, 0)
		pause = t.pause
		if pause == 0 { // paused over HTTP or by another instance
			pause = left.Round(time.Second)
		}
	}
	d := newYAML().add("name", st.Name).add("current-jobs-urgent", st.Urgent).
		add("current-jobs-ready", st.Ready).add("current-jobs-reserved", st.Reserved).
		add("current-jobs-delayed", st.Delayed).add("current-jobs-buried", st.Buried).
		add("total-jobs", t.totalJobs).add("current-using", t.using).
		add("current-watching", t.watching).add("current-waiting", t.waiting).
		add("cmd-delete", t.deletes).add("cmd-pause-tube", t.pauses).
		add("pause", int64(pause/time.Second)).add("pause-time-left", int64(left/time.Second))
	c.writeData(d.bytes())
	return nil
}

// statsOps are the cmd-* keys of stats, in beanstalkd's order.
var statsOps = []struct {
	key string
	op  op
}{
	{"cmd-put", opPut}, {"cmd-peek", opPeek}, {"cmd-peek-ready", opPeekReady},
	{"cmd-peek-delayed", opPeekDelayed}, {"cmd-peek-buried", opPeekBuried},
	{"cmd-reserve", opReserve}, {"cmd-reserve-with-timeout", opReserveWithTimeout},
	{"cmd-delete", opDelete}, {"cmd-release", opRelease}, {"cmd-use", opUse},
	{"cmd-watch", opWatch}, {"cmd-ignore", opIgnore}, {"cmd-bury", opBury},
	{"cmd-kick", opKick}, {"cmd-touch", opTouch}, {"cmd-stats", opStats},
	{"cmd-stats-job", opStatsJob}, {"cmd-stats-tube", opStatsTube},
	{"cmd-list-tubes", opListTubes}, {"cmd-list-tube-used", opListTubeUsed},
	{"cmd-list-tubes-watched", opListTubesWatched}, {"cmd-pause-tube", opPauseTube},
}

func (c *conn) cmdStats(*command) error {
	s := c.srv
	stored, err := s.Engine.Topics(c.ctx)
	if err != nil {
		return err
	}
	var sum delayq.TopicStats
	for _, t := range stored {
		sum.Urgent += t.Urgent
		sum.Ready += t.Ready
		sum.Reserved += t.Reserved
		sum.Delayed += t.Delayed
		sum.Buried += t.Buried
	}
	d := newYAML().add("current-jobs-urgent", sum.Urgent).add("current-jobs-ready", sum.Ready).
		add("current-jobs-reserved", sum.Reserved).add("current-jobs-delayed", sum.Delayed).
		add("current-jobs-buried", sum.Buried)
	for _, o := range statsOps {
		d.add(o.key, s.stats.ops[o.op].Load())
	}
	user, sys := rusage()
	host, _ := os.Hostname()
	d.add("job-timeouts", s.Engine.Metrics().TimeoutsTotal()).add("total-jobs", s.stats.totalJobs.Load()).
		add("max-job-size", s.Engine.Config().MaxBody).
		add("current-tubes", len(s.tubes.list(stored, time.Now()))).
		add("current-connections", s.connCount()).
		add("current-producers", s.stats.producers.Load()).
		add("current-workers", s.stats.workers.Load()).
		add("current-waiting", s.stats.waiting.Load()).
		add("total-connections", s.stats.totalConns.Load()).
		add("pid", os.Getpid()).add("version", strconv.Quote(version)).
		add("rusage-utime", seconds6(user)).add("rusage-stime", seconds6(sys)).
		add("uptime", int64(time.Since(s.started)/time.Second)).
		add("binlog-oldest-index", 0).add("binlog-current-index", 0).
		add("binlog-records-migrated", 0).add("binlog-records-written", 0).
		add("binlog-max-size", 10485760).
		add("draining", s.Engine.Draining()).add("id", s.instance).
		add("hostname", host).add("os", runtime.GOOS).add("platform", platform())
	c.writeData(d.bytes())
	return nil
}

// seconds6 formats a duration as beanstalkd's "%d.%06d".
func seconds6(d time.Duration) string {
	us := d.Microseconds()
	return fmt.Sprintf("%d.%06d", us/1e6, us%1e6)
}

// platform names the machine as uname does.
func platform() string {
	switch runtime.GOARCH {
	case "amd64":
		return "x86_64"
	case "arm64":
		return "aarch64"
	}
	return runtime.GOARCH
}
