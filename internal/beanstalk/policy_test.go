package beanstalk

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
)

func setPolicy(t *testing.T, ts *testServer, topic string, p engine.Policy) {
	t.Helper()
	if _, err := ts.engine.SetPolicy(t.Context(), topic, p); err != nil {
		t.Fatalf("SetPolicy(%s): %v", topic, err)
	}
}

// put sends a put and returns the job's id.
func putLine(t *testing.T, c net.Conn, r *bufio.Reader, head, body string) uint64 {
	t.Helper()
	got := roundTrip(t, c, r, head+"\r\n"+body)
	id, err := strconv.ParseUint(strings.TrimPrefix(got, "INSERTED "), 10, 64)
	if !strings.HasPrefix(got, "INSERTED ") || err != nil {
		t.Fatalf("%s = %q, want INSERTED <id>", head, got)
	}
	return id
}

// reserveOne reserves and reads the job's body, returning its id.
func reserveOne(t *testing.T, c net.Conn, r *bufio.Reader) uint64 {
	t.Helper()
	got := roundTrip(t, c, r, "reserve-with-timeout 0")
	f := strings.Fields(got)
	if len(f) != 3 || f[0] != "RESERVED" {
		t.Fatalf("reserve = %q", got)
	}
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	id, _ := strconv.ParseUint(f[1], 10, 64)
	return id
}

func TestPolicyMaxJobsOutOfMemory(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	setPolicy(t, ts, "default", engine.Policy{MaxJobs: 2})
	c, r := dial(t, ts.addr)
	putLine(t, c, r, "put 0 0 60 1", "x")
	id := putLine(t, c, r, "put 0 0 60 1", "x")
	if got := roundTrip(t, c, r, "put 0 0 60 1\r\nx"); got != "OUT_OF_MEMORY" {
		t.Fatalf("a put past max_jobs = %q, want OUT_OF_MEMORY", got)
	}
	// The refusal is for that put only: the connection is served, other
	// tubes take jobs, and a delete makes room.
	if got := roundTrip(t, c, r, "use other"); got != "USING other" {
		t.Fatal(got)
	}
	putLine(t, c, r, "put 0 0 60 1", "x")
	roundTrip(t, c, r, "use default")
	if got := roundTrip(t, c, r, "delete "+strconv.FormatUint(id, 10)); got != "DELETED" {
		t.Fatal(got)
	}
	putLine(t, c, r, "put 0 0 60 1", "x")
}

func TestPolicyDefaultsOverBeanstalk(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	setPolicy(t, ts, "default", engine.Policy{TTR: 45 * time.Second, MaxAttempts: 4})
	c, r := dial(t, ts.addr)
	for _, tc := range []struct {
		head string
		ttr  time.Duration
	}{
		{"put 0 0 0 1", 45 * time.Second}, // ttr 0 means none: the policy's
		{"put 0 0 5 1", 5 * time.Second},  // a ttr of the client's own stays
	} {
		id := putLine(t, c, r, tc.head, "x")
		j, err := ts.engine.Get(t.Context(), delayq.Ref{Seq: id})
		if err != nil {
			t.Fatal(err)
		}
		if j.TTR != tc.ttr || j.MaxAttempts != 4 {
			t.Errorf("%s: ttr %s, max_attempts %d; want %s, 4", tc.head, j.TTR, j.MaxAttempts, tc.ttr)
		}
	}
	// Without a policy, ttr 0 is raised to 1 s as beanstalkd does.
	roundTrip(t, c, r, "use plain")
	id := putLine(t, c, r, "put 0 0 0 1", "x")
	if j, _ := ts.engine.Get(t.Context(), delayq.Ref{Seq: id}); j.TTR != time.Second || j.MaxAttempts != 0 {
		t.Errorf("put ttr 0 without a policy: ttr %s, max_attempts %d; want 1s, 0", j.TTR, j.MaxAttempts)
	}
}

func TestPolicyBackoffOverBeanstalk(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	bo := store.Backoff{Initial: time.Hour, Max: 4 * time.Hour, Factor: 2, Jitter: 0.5}
	setPolicy(t, ts, "default", engine.Policy{Backoff: &bo})
	c, r := dial(t, ts.addr)
	id := putLine(t, c, r, "put 0 0 1 1", "x")
	ids := strconv.FormatUint(id, 10)

	// release <id> <pri> 0: the backoff of the first attempt.
	reserveOne(t, c, r)
	before := time.Now()
	if got := roundTrip(t, c, r, "release "+ids+" 0 0"); got != "RELEASED" {
		t.Fatal(got)
	}
	after := delayq.CeilMilli(time.Now())
	j, _ := ts.engine.Get(t.Context(), delayq.Ref{Seq: id})
	d := bo.Delay(j.ID, 1)
	if j.State != delayq.StateDelayed || j.Due.Before(before.Add(d)) || j.Due.After(after.Add(d)) {
		t.Fatalf("after release with delay 0: %s due %s, want delayed %s after the release", j.State, j.Due, d)
	}
	if got := roundTrip(t, c, r, "kick-job "+ids); got != "KICKED" {
		t.Fatal(got)
	}

	// A TTR that runs out (ttr 1 s): delayed by the second attempt's
	// backoff from the expired deadline.
	reserveOne(t, c, r)
	held, _ := ts.engine.Get(t.Context(), delayq.Ref{Seq: id})
	deadline := time.Now().Add(10 * time.Second)
	for j.Timeouts == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		j, _ = ts.engine.Get(t.Context(), delayq.Ref{Seq: id})
	}
	if want := held.Deadline.Add(bo.Delay(j.ID, 2)); j.State != delayq.StateDelayed || !j.Due.Equal(want) {
		t.Fatalf("after the TTR ran out: %s due %s (timeouts %d), want delayed due %s", j.State, j.Due, j.Timeouts, want)
	}
	if got := roundTrip(t, c, r, "reserve-with-timeout 0"); got != "TIMED_OUT" {
		t.Fatalf("reserve during the backoff = %q, want TIMED_OUT", got)
	}
	// A release with a delay of its own keeps it.
	roundTrip(t, c, r, "kick-job "+ids)
	reserveOne(t, c, r)
	roundTrip(t, c, r, "release "+ids+" 0 7")
	if j, _ := ts.engine.Get(t.Context(), delayq.Ref{Seq: id}); j.Delay != 7*time.Second {
		t.Errorf("release with delay 7: delay %s", j.Delay)
	}
}
