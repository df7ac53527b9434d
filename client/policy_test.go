package client

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

func TestPolicyCalls(t *testing.T) {
	t.Parallel()
	_, c := newTestClient(t)
	ctx := t.Context()
	if _, err := c.GetPolicy(ctx, "mail/welcome"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("GetPolicy of none = %v, want ErrNotFound", err)
	}
	set, err := c.SetPolicy(ctx, "mail/welcome", Policy{TTR: 30 * time.Second, MaxJobs: 2,
		Backoff: &PolicyBackoff{Initial: time.Second, Jitter: 0.25}})
	if err != nil {
		t.Fatalf("SetPolicy = %v", err)
	}
	want := &Policy{TTR: 30 * time.Second, MaxJobs: 2, Backoff: &PolicyBackoff{Initial: time.Second, Max: time.Hour, Factor: 2, Jitter: 0.25}}
	if diff := cmp.Diff(want, set); diff != "" {
		t.Errorf("SetPolicy answered (-want +got):\n%s", diff)
	}
	if got, err := c.GetPolicy(ctx, "mail/welcome"); err != nil || !cmp.Equal(want, got) {
		t.Errorf("GetPolicy = %+v, %v", got, err)
	}
	if _, err := c.SetPolicy(ctx, "mail/welcome", Policy{MaxJobs: -1}); !errors.Is(err, delayq.ErrInvalid) {
		t.Errorf("SetPolicy(max_jobs -1) = %v, want ErrInvalid", err)
	}

	// A put past max_jobs fails at once (not retried) with topic_full.
	for i := range 2 {
		if _, err := c.Put(ctx, "mail/welcome", PutRequest{Body: []byte{byte('a' + i)}}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = c.Put(ctx, "mail/welcome", PutRequest{Body: []byte("c")})
	var re *api.RemoteError
	if !errors.Is(err, delayq.ErrLimit) || !errors.As(err, &re) || re.Code != "topic_full" || re.Status != 429 {
		t.Errorf("Put past max_jobs = %v, want a 429 topic_full wrapping ErrLimit", err)
	}
	if err := c.DeletePolicy(ctx, "mail/welcome"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeletePolicy(ctx, "mail/welcome"); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("DeletePolicy of none = %v, want ErrNotFound", err)
	}
}
