package beanstalk

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/beanstalkd/go-beanstalk"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
)

// TestGoBeanstalkClient drives delayq with the Go client through a whole
// producer/consumer cycle.
func TestGoBeanstalkClient(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	c, err := beanstalk.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tube := beanstalk.NewTube(c, "emails")
	id, err := tube.Put([]byte("welcome"), 1, 0, time.Minute)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	if _, err := tube.Put([]byte("later"), 1, time.Hour, time.Minute); err != nil {
		t.Fatalf("Put delayed: %v", err)
	}
	set := beanstalk.NewTubeSet(c, "emails")
	got, body, err := set.Reserve(time.Second)
	if err != nil || got != id || string(body) != "welcome" {
		t.Fatalf("Reserve = %d %q %v, want %d \"welcome\"", got, body, err, id)
	}
	if err := c.Release(id, 5, 0); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got, _, err = set.Reserve(time.Second); err != nil || got != id {
		t.Fatalf("Reserve after release = %d %v", got, err)
	}
	if err := c.Touch(id); err != nil {
		t.Fatalf("Touch: %v", err)
	}
	if err := c.Bury(id, 7); err != nil {
		t.Fatalf("Bury: %v", err)
	}
	stats, err := c.StatsJob(id)
	if err != nil || stats["state"] != "buried" || stats["pri"] != "7" {
		t.Fatalf("StatsJob = %v %v, want buried with pri 7", stats, err)
	}
	if err := c.KickJob(id); err != nil {
		t.Fatalf("KickJob: %v", err)
	}
	if got, _, err = set.Reserve(time.Second); err != nil || got != id {
		t.Fatalf("Reserve after kick = %d %v", got, err)
	}
	if err := c.Delete(id); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, _, err := set.Reserve(0); !errors.Is(err, beanstalk.ErrTimeout) {
		t.Fatalf("Reserve on an empty tube = %v, want ErrTimeout", err)
	}
	n, err := tube.Kick(10)
	if err != nil || n != 1 {
		t.Fatalf("Kick = %d %v, want 1 delayed job kicked", n, err)
	}
	ts2, err := tube.Stats()
	if err != nil || ts2["current-jobs-ready"] != "1" || ts2["total-jobs"] != "2" {
		t.Fatalf("tube Stats = %v %v", ts2, err)
	}
	tubes, err := c.ListTubes()
	if err != nil || !contains(tubes, "emails") {
		t.Fatalf("ListTubes = %v %v", tubes, err)
	}
}

func contains(list []string, s string) bool { return indexOf(list, s) >= 0 }

// TestAcrossProtocols puts and finishes jobs through the engine (what the
// HTTP API calls) and through beanstalkd commands, each seeing the other's
// jobs: a tube is a topic and a seq is a beanstalkd id.
func TestAcrossProtocols(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	ctx := t.Context()
	jobs, err := ts.engine.Put(ctx, []engine.PutRequest{{ID: "order-1", Topic: "orders", Body: []byte("from http")}})
	if err != nil {
		t.Fatal(err)
	}
	c, err := beanstalk.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	id, body, err := beanstalk.NewTubeSet(c, "orders").Reserve(time.Second)
	if err != nil || id != jobs[0].Seq || string(body) != "from http" {
		t.Fatalf("Reserve = %d %q %v, want seq %d", id, body, err, jobs[0].Seq)
	}
	if _, err := ts.engine.Delete(ctx, delayq.Ref{ID: "order-1"}, true); err != nil {
		t.Fatalf("operator delete of a job held over beanstalkd: %v", err)
	}
	if err := c.Delete(id); !isNotFound(err) {
		t.Fatalf("beanstalk Delete after the operator's = %v, want NOT_FOUND", err)
	}
	id, err = beanstalk.NewTube(c, "orders").Put([]byte("from beanstalk"), 0, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.engine.Reserve(ctx, engine.ReserveRequest{Topics: []string{"orders"}})
	if err != nil || len(got) != 1 || got[0].Seq != id {
		t.Fatalf("engine Reserve = %v %v, want seq %d", got, err, id)
	}
	if err := c.Delete(id); !isNotFound(err) {
		t.Fatalf("beanstalk Delete of a job reserved over HTTP = %v, want NOT_FOUND", err)
	}
	if _, err := ts.engine.Finish(ctx, delayq.Ref{ID: got[0].ID, Reservation: got[0].Reservation}); err != nil {
		t.Fatalf("Finish: %v", err)
	}
}

func isNotFound(err error) bool {
	var ce beanstalk.ConnError
	return errors.As(err, &ce) && errors.Is(ce.Err, beanstalk.ErrNotFound)
}

// TestCloseReleases shows that a closed connection's reservations go back
// to ready at once, not at their TTR.
func TestCloseReleases(t *testing.T) {
	t.Parallel()
	ts := startDelayq(t, Limits{})
	c, err := beanstalk.Dial("tcp", ts.addr)
	if err != nil {
		t.Fatal(err)
	}
	id, err := c.Put([]byte("x"), 0, 0, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := c.Reserve(time.Second); err != nil {
		t.Fatal(err)
	}
	c.Close()
	got, err := ts.engine.Reserve(t.Context(), engine.ReserveRequest{Topics: []string{"default"}, Wait: 5 * time.Second})
	if err != nil || len(got) != 1 || got[0].Seq != id {
		t.Fatalf("Reserve after the holder closed = %v %v, want job %d", got, err, id)
	}
}

// TestPheanstalk runs Debian's PHP client (php-pda-pheanstalk) against
// delayq.
func TestPheanstalk(t *testing.T) {
	t.Parallel()
	const autoload = "/usr/share/php/Pheanstalk/autoload.php"
	php, err := exec.LookPath("php")
	if _, serr := os.Stat(autoload); err != nil || serr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but php or pheanstalk is missing: apt-get install php-cli php-pda-pheanstalk")
		}
		t.Skip("php-cli and php-pda-pheanstalk are not installed")
	}
	ts := startDelayq(t, Limits{})
	host, port, _ := net.SplitHostPort(ts.addr)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, php, "testdata/compat/pheanstalk.php", host, port, autoload).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("pheanstalk script: %v\n%s", err, out)
	}
}
