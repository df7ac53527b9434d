package server

import (
	"context"
	"fmt"
	"github.com/delayq/delayq"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/internal/schedule"
)

// consumeAll reserves and finishes jobs of topic through c until stop is
// closed, and returns how often each job id was handed out.
func consumeAll(t *testing.T, c *client.Client, topic string, stop <-chan struct{}) (seen func() map[string]int) {
	var mu sync.Mutex
	ids := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			jobs, err := c.Reserve(context.Background(), []string{topic}, 100, 300*time.Millisecond)
			if err != nil {
				time.Sleep(50 * time.Millisecond) // an instance is going away; the client fails over
				continue
			}
			for _, j := range jobs {
				mu.Lock()
				ids[j.ID]++
				mu.Unlock()
				if err := c.Finish(context.Background(), j.ID, j.Reservation); err != nil {
					t.Errorf("Finish(%s) = %v", j.ID, err)
				}
			}
		}
	}()
	return func() map[string]int {
		<-done
		mu.Lock()
		defer mu.Unlock()
		return ids
	}
}

// checkTicks fails unless seen holds every tick of an "@every step"
// schedule from its first up to last, each once. A missing tick's job is
// looked up through c, so a failure says whether it was never put or
// where it got stuck.
func checkTicks(t *testing.T, c *client.Client, name string, anchor, last time.Time, step time.Duration, seen map[string]int, min int) {
	t.Helper()
	n := int(last.Sub(anchor) / step)
	if n < min {
		t.Fatalf("the schedule fired %d ticks, want at least %d", n, min)
	}
	var missing, twice []string
	for k := 1; k <= n; k++ {
		id := schedule.JobID(name, anchor.Add(time.Duration(k)*step))
		switch seen[id] {
		case 0:
			missing = append(missing, id)
		case 1:
		default:
			twice = append(twice, id)
		}
		delete(seen, id)
	}
	extra := make([]string, 0, len(seen))
	for id := range seen {
		extra = append(extra, id)
	}
	sort.Strings(extra)
	if len(missing)+len(twice)+len(extra) > 0 {
		for _, id := range missing {
			j, err := c.Get(context.Background(), id)
			if err != nil {
				t.Logf("missing %s: %v", id, err)
				continue
			}
			t.Logf("missing %s: %s, due %s, created %s, attempts %d, timeouts %d, releases %d, deadline %v",
				id, j.State, j.Due.Format(time.StampMilli), j.Created.Format(time.StampMilli), j.Attempts, j.Timeouts, j.Releases, j.Deadline)
		}
		t.Fatalf("over %d ticks: missing %v, handed out twice %v, unexpected %v", n, missing, twice, extra)
	}
}

// waitFor polls cond (the state is in another process-like component; no
// event to wait on) until it holds or d passes.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// consumed reports whether a Get found the job gone or retained as
// ended (finished, with --retain on by default).
func consumed(j *delayq.Job, err error) bool {
	return err != nil || j.State.Retained()
}

// TestScheduleExactlyOnceOverRedis: two instances over one Redis fire an
// "@every 100ms" schedule while one of them is shut down, started again
// and shut down again. Over 100+ ticks every tick's job is handed out
// exactly once to a consumer that finishes each at once (so a tick fired
// again would be a new job, not "already exists").
func TestScheduleExactlyOnceOverRedis(t *testing.T) {
	url := redisURL(t)
	a, b := startOverRedis(t, url), startOverRedis(t, url)
	cb := newClient(t, b)
	name := fmt.Sprintf("redis-once-%d", time.Now().UnixNano())
	sc, err := newClient(t, a).PutSchedule(t.Context(), name, client.ScheduleRequest{Topic: name, Every: 100 * time.Millisecond, Missed: "all"})
	if err != nil {
		t.Fatalf("PutSchedule = %v", err)
	}
	t.Cleanup(func() { cb.DeleteSchedule(context.Background(), name) })

	stop := make(chan struct{})
	seen := consumeAll(t, cb, name, stop)
	time.Sleep(3 * time.Second) // the test's script: instance A runs 3 s, is away 2 s, runs 3 s
	if err := a.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown(A) = %v", err)
	}
	time.Sleep(2 * time.Second)
	a2 := startOverRedis(t, url)
	time.Sleep(3 * time.Second)
	if err := a2.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown(A') = %v", err)
	}
	time.Sleep(2 * time.Second)

	paused, err := cb.PauseSchedule(t.Context(), name)
	if err != nil {
		t.Fatalf("PauseSchedule = %v", err)
	}
	// Every tick up to Last is put; wait until its job (due at Last) is
	// consumed, then a little longer for stragglers that must not come.
	last := paused.Last
	waitFor(t, 15*time.Second, "the last tick's job", func() bool {
		return consumed(cb.Get(t.Context(), schedule.JobID(name, last))) && time.Now().After(last.Add(300*time.Millisecond))
	})
	time.Sleep(500 * time.Millisecond)
	close(stop)
	checkTicks(t, cb, name, sc.Created, last, 100*time.Millisecond, seen(), 100)
}

// TestScheduleSurvivesRestart: on the embedded store a schedule, its ticks
// fired and its missed-tick policy survive a restart: with "all" the
// ticks of the downtime fire after it, each once.
func TestScheduleSurvivesRestart(t *testing.T) {
	cfg := testConfig(t)
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	c := newClient(t, s)
	sc, err := c.PutSchedule(t.Context(), "restart", client.ScheduleRequest{Topic: "restart", Every: 200 * time.Millisecond, Missed: "all", Body: []byte("tick")})
	if err != nil {
		t.Fatalf("PutSchedule = %v", err)
	}
	time.Sleep(time.Second)
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // past Grace: the ticks of the gap are missed ticks
	s2 := startServer(t, cfg, &syncBuffer{})
	c2 := newClient(t, s2)
	got, err := c2.Schedule(t.Context(), "restart")
	if err != nil || got.Cron != "@every 200ms" || string(got.Body) != "tick" {
		t.Fatalf("Schedule after restart = %+v, %v", got, err)
	}
	stop := make(chan struct{})
	seen := consumeAll(t, c2, "restart", stop)
	time.Sleep(time.Second)
	paused, err := c2.PauseSchedule(t.Context(), "restart")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the last tick's job", func() bool {
		return consumed(c2.Get(t.Context(), schedule.JobID("restart", paused.Last))) && time.Now().After(paused.Last.Add(300*time.Millisecond))
	})
	close(stop)
	checkTicks(t, c2, "restart", sc.Created, paused.Last, 200*time.Millisecond, seen(), 15)
}

// TestScheduleAndTopicControlScopes: reading schedules takes read;
// changing them, and pausing, resuming or purging a topic, takes admin.
func TestScheduleAndTopicControlScopes(t *testing.T) {
	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	u := s.URL()
	sched := `{"topic":"orders","every":"1h"}`
	for _, c := range []struct {
		name, method, path, token, body string
		status                          int
	}{
		{"producer making a schedule", "PUT", "/v1/schedules/s1", "shop-token", sched, 403},
		{"admin making a schedule", "PUT", "/v1/schedules/s1", "ops-token", sched, 201},
		{"producer reading schedules", "GET", "/v1/schedules", "shop-token", "", 403},
		{"admin reading a schedule", "GET", "/v1/schedules/s1", "ops-token", "", 200},
		{"consumer pausing a schedule", "POST", "/v1/schedules/s1/pause", "worker-token", "", 403},
		{"producer deleting a schedule", "DELETE", "/v1/schedules/s1", "shop-token", "", 403},
		{"admin deleting a schedule", "DELETE", "/v1/schedules/s1", "ops-token", "", 204},
		{"producer pausing its topic", "POST", "/v1/topics/orders/pause", "shop-token", "", 403},
		{"consumer purging its topic", "DELETE", "/v1/topics/orders/jobs?state=ready", "worker-token", "", 403},
		{"admin pausing a topic", "POST", "/v1/topics/orders/pause", "ops-token", "", 200},
		{"admin resuming a topic", "POST", "/v1/topics/orders/resume", "ops-token", "", 200},
		{"admin purging a topic", "DELETE", "/v1/topics/orders/jobs?state=ready", "ops-token", "", 200},
	} {
		if status, code := secCall(t, hc, c.method, u+c.path, c.token, "", c.body); status != c.status {
			t.Errorf("%s: %d %q, want %d", c.name, status, code, c.status)
		}
	}
}
