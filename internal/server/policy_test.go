package server

import (
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// TestPoliciesOverRedis: a policy set through one instance is read at
// once and applied within its refresh by the other, whose puts take its
// ttr and hit its max_jobs, and a TTR that runs out over Redis (in the
// tick script) is backed off.
func TestPoliciesOverRedis(t *testing.T) {
	url := redisURL(t)
	a, b := startOverRedis(t, url), startOverRedis(t, url)
	ca, cb := newClient(t, a), newClient(t, b)
	ctx := t.Context()
	topic := "policy-" + time.Now().Format("150405.000000")
	bo := &client.PolicyBackoff{Initial: time.Hour, Max: 2 * time.Hour, Factor: 2, Jitter: 0.3}
	if _, err := ca.SetPolicy(ctx, topic, client.Policy{TTR: 7 * time.Second, MaxJobs: 3, Backoff: bo}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ca.DeletePolicy(t.Context(), topic) })
	if p, err := cb.GetPolicy(ctx, topic); err != nil || p.MaxJobs != 3 {
		t.Fatalf("GetPolicy on B right after A set it = %+v, %v", p, err)
	}
	start := time.Now()
	waitUntil(t, "B puts with the policy's ttr", func() bool {
		res, err := cb.Put(ctx, topic, client.PutRequest{Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		j, err := cb.Get(ctx, res.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.TTR == 7*time.Second {
			return true
		}
		if err := cb.Delete(ctx, res.ID); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		return false
	})
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("the policy reached B after %s, documented within about 2s", d)
	}
	for range 2 {
		if _, err := ca.Put(ctx, topic, client.PutRequest{Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := cb.Put(ctx, topic, client.PutRequest{Body: []byte("x")})
	var re *api.RemoteError
	if !errors.As(err, &re) || re.Code != "topic_full" || !errors.Is(err, delayq.ErrLimit) {
		t.Fatalf("a 4th put on B with max_jobs 3 = %v, want topic_full", err)
	}

	// A TTR that runs out is backed off by the tick script, from the
	// expired deadline.
	if _, err := ca.Purge(ctx, topic, delayq.StateReady); err != nil {
		t.Fatal(err)
	}
	res, err := ca.Put(ctx, topic, client.PutRequest{ID: topic + "-ttr", Body: []byte("x"), TTR: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := cb.Reserve(ctx, []string{topic}, 1, 0)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Reserve = %v, %v", jobs, err)
	}
	var j *delayq.Job
	waitUntil(t, "the TTR ran out", func() bool {
		j, err = ca.Get(ctx, res.ID) // the API shows no timeouts count: the state tells
		return err == nil && j.State != delayq.StateReserved
	})
	if j.State != delayq.StateDelayed || j.Due.Sub(jobs[0].Deadline) < 42*time.Minute || j.Due.Sub(jobs[0].Deadline) > 78*time.Minute {
		t.Errorf("after its TTR ran out over Redis: %s due %s after the deadline, want delayed 1h ±30%%", j.State, j.Due.Sub(jobs[0].Deadline))
	}
}
