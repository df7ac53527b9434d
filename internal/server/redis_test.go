package server

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/internal/config"
)

// redisURL returns a fresh database URL on the test Redis, skipping when
// DELAYQ_TEST_REDIS is unset (a failure under CI).
func redisURL(t *testing.T) string {
	t.Helper()
	addr := os.Getenv("DELAYQ_TEST_REDIS")
	if addr == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("DELAYQ_TEST_REDIS is not set; scripts/test.sh starts a Redis for the tests")
		}
		t.Skip("DELAYQ_TEST_REDIS not set; run scripts/test.sh or scripts/redis-test-env.sh")
	}
	return "redis://" + addr + "/9"
}

// TestTwoInstancesOverRedis runs two real servers with --redis: both are
// listed in /v1/cluster, and a job put through one is reserved through the
// other by a consumer that was already waiting there.
func TestTwoInstancesOverRedis(t *testing.T) {
	url := redisURL(t)
	a, b := startOverRedis(t, url), startOverRedis(t, url)
	ca := client.New([]string{a.URL()}, client.Discovery(0))
	cb := client.New([]string{b.URL()}, client.Discovery(0))

	deadline := time.Now().Add(10 * time.Second)
	for {
		inst, err := ca.Cluster(t.Context())
		if err == nil && len(inst) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Cluster() = %v, %v; want both instances", inst, err)
		}
		time.Sleep(50 * time.Millisecond)
	}

	topic := "redis-wiring-" + time.Now().Format("150405.000000")
	got := make(chan int, 1)
	go func() {
		jobs, err := cb.Reserve(context.Background(), []string{topic}, 1, 10*time.Second)
		if err != nil {
			t.Errorf("Reserve on B = %v", err)
		}
		got <- len(jobs)
	}()
	// The put must come after B's consumer parked and B hears A's events
	// (pub/sub keeps no backlog); both are observable, so wait for them.
	waitUntil(t, "B's consumer parked and B listening to A", func() bool {
		return listening(b) && b.Engine().Waiting(topic) == 1
	})
	if _, err := ca.Put(t.Context(), topic, client.PutRequest{Body: []byte("x")}); err != nil {
		t.Fatalf("Put on A = %v", err)
	}
	if n := <-got; n != 1 {
		t.Errorf("consumer waiting on B got %d jobs, want the one put on A", n)
	}
}

// TestIdempotencyWindowAcrossRedisInstances: a job finished through one
// instance keeps its id taken on the other (the default --retain), in any
// topic: the put there answers "exists" with the state finished, and the
// other instance shows the finished job with its attempt.
func TestIdempotencyWindowAcrossRedisInstances(t *testing.T) {
	url := redisURL(t)
	a, b := startOverRedis(t, url), startOverRedis(t, url)
	ca := client.New([]string{a.URL()}, client.Discovery(0))
	cb := client.New([]string{b.URL()}, client.Discovery(0))
	stamp := time.Now().Format("150405.000000")
	topic, id := "window-"+stamp, "order-"+stamp
	if _, err := ca.Put(t.Context(), topic, client.PutRequest{ID: id, Body: []byte("x")}); err != nil {
		t.Fatalf("Put on A = %v", err)
	}
	jobs, err := ca.Reserve(t.Context(), []string{topic}, 1, 5*time.Second)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve on A = %d jobs, %v", len(jobs), err)
	}
	if err := ca.Finish(t.Context(), id, jobs[0].Reservation); err != nil {
		t.Fatalf("Finish on A = %v", err)
	}
	for _, to := range []string{topic, "other-" + stamp} {
		_, err := cb.Put(t.Context(), to, client.PutRequest{ID: id, Body: []byte("x")})
		if !errors.Is(err, delayq.ErrExists) || client.ExistingState(err) != delayq.StateFinished {
			t.Fatalf("Put of the finished id into %s on B = %v (state %q), want exists, finished", to, err, client.ExistingState(err))
		}
	}
	j, err := cb.Get(t.Context(), id)
	if err != nil || j.State != delayq.StateFinished || len(j.History) != 1 || j.History[0].Outcome != delayq.OutcomeFinished {
		t.Fatalf("Get on B = %+v, %v; want the finished job with its one finished attempt", j, err)
	}
}

// listening reports whether s's Redis store hears the other instances'
// events (redisstore's Listening, which no store interface carries: the
// test asks the store the server opened).
func listening(s *Server) bool {
	l, ok := s.st.(interface{ Listening() bool })
	return ok && l.Listening()
}

func TestRedisURLValidated(t *testing.T) {
	cfg := config.Default()
	cfg.Redis = "http://nope"
	if err := cfg.Validate(); err == nil {
		t.Error("Validate(redis=http://nope) = nil, want an error naming --redis")
	}
}

// startOverRedis starts a server with --redis url, shut down when the test
// ends.
func startOverRedis(t *testing.T, url string) *Server {
	t.Helper()
	cfg := testConfig(t)
	cfg.Redis, cfg.DataDir = url, ""
	// The instance's log is shown when the test fails: a test over several
	// instances otherwise fails with no trace of what each one did.
	logs := &syncBuffer{}
	s := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start(--redis %s) = %v", url, err)
	}
	t.Cleanup(func() {
		s.Shutdown(context.Background())
		if t.Failed() {
			t.Logf("log of the instance at %s:\n%s", s.URL(), logs.String())
		}
	})
	return s
}

// TestStartLogNamesTheStoreUsed: a server on Redis names Redis in its
// start log, not the data directory it ignores; one on the embedded store
// names its data directory.
func TestStartLogNamesTheStoreUsed(t *testing.T) {
	url := redisURL(t)
	serving := func(cfg config.Config) string {
		t.Helper()
		logs := &syncBuffer{}
		s := New(cfg, slog.New(slog.NewTextHandler(logs, nil)))
		if err := s.Start(t.Context()); err != nil {
			t.Fatalf("Start = %v", err)
		}
		defer s.Shutdown(context.Background())
		for _, l := range strings.Split(logs.String(), "\n") {
			if strings.Contains(l, `msg="delayq serving"`) {
				return l
			}
		}
		t.Fatalf("no start log line in:\n%s", logs.String())
		return ""
	}
	cfg := testConfig(t)
	dir := cfg.DataDir
	cfg.Redis = url
	if l := serving(cfg); !strings.Contains(l, "store.kind=redis store.redis="+url) || strings.Contains(l, "data_dir") || strings.Contains(l, dir) {
		t.Errorf("start log of a Redis-backed server = %s; want store.kind=redis and its URL, no data directory", l)
	}
	cfg.Redis = ""
	if l := serving(cfg); !strings.Contains(l, "store.kind=disk store.data_dir="+dir) {
		t.Errorf("start log of a server on the embedded store = %s; want store.kind=disk and its data directory", l)
	}
}
