package delayqtest_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/delayqtest"
)

func TestServerServesAndRestartsWithItsJobs(t *testing.T) {
	t.Parallel()
	srv := delayqtest.NewServer(t, delayqtest.MaxWait(time.Second))
	resp, err := http.Get(srv.URL + "/healthz")
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /healthz = %v, %v; want 200", resp, err)
	}
	resp.Body.Close()
	c := client.New([]string{srv.URL}, client.Discovery(0))
	defer c.Close()
	ctx := t.Context()
	if _, err := c.Put(ctx, "t", client.PutRequest{ID: "kept", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	if j, err := c.Get(ctx, "kept"); err != nil || j.State != delayq.StateDelayed {
		t.Errorf("Get after Restart = %v, %v; want the delayed job", j, err)
	}
	srv.Stop()
	srv.Stop() // twice is fine
	if err := c.Health(ctx); !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("Health after Stop = %v, want ErrUnavailable", err)
	}
	if srv.Engine() != nil {
		t.Error("Engine() after Stop is not nil")
	}
}

func TestServersAreIndependent(t *testing.T) {
	t.Parallel()
	a, b := delayqtest.NewServer(t), delayqtest.NewServer(t)
	if a.URL == b.URL || a.Dir == b.Dir {
		t.Errorf("two servers share %s / %s", a.URL, a.Dir)
	}
}
