package beanstalk

import (
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"
)

// TestStatsCountsJobTimeouts: stats job-timeouts counts TTR expiries, as
// stats-job's timeouts does for one job (both read the engine's count).
func TestStatsCountsJobTimeouts(t *testing.T) {
	ts := startDelayq(t, Limits{})
	c, err := beanstalk.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, err := c.Put([]byte("x"), 0, 0, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if got, _, err := c.Reserve(0); err != nil || got != id {
		t.Fatalf("reserve = %d, %v", got, err)
	}
	// The TTR runs out and the job is ready again: a reserve that waits
	// gets it back (observable state, no sleep). Another connection, as
	// the holder itself would get DEADLINE_SOON.
	c2, err := beanstalk.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	if got, _, err := c2.Reserve(5 * time.Second); err != nil || got != id {
		t.Fatalf("reserve after the TTR = %d, %v", got, err)
	}
	job, err := c.StatsJob(id)
	if err != nil || job["timeouts"] != "1" {
		t.Fatalf("stats-job = %v, %v; want timeouts 1", job, err)
	}
	stats, err := c.Stats()
	if err != nil || stats["job-timeouts"] != "1" {
		t.Fatalf("stats job-timeouts = %q (%v), want 1", stats["job-timeouts"], err)
	}
}
