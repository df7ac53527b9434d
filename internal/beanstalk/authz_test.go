package beanstalk

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// The attack of issue 18 over beanstalkd: a connection whose token has
// produce and consume on a* tries every command that names a job by id
// on a job of tube bvictim that another connection holds. beanstalkd's
// reservation is the connection, so release, bury and touch answer
// NOT_FOUND; the commands that need a scope on the job's tube are
// refused. The job stays reserved, untouched, by its holder.
func TestReservationAttackOverBeanstalk(t *testing.T) {
	t.Parallel()
	attacker := principal(t, `"scopes":["produce","consume"],"topics":["a*"]`)
	victim := principal(t, `"scopes":["produce","consume","read"],"topics":["bvictim"]`)
	var mu sync.Mutex
	victims := map[string]bool{}
	ts := startGuarded(t, engine.Config{}, func(s *Server) {
		s.Admit = func(_ context.Context, nc net.Conn) *auth.Principal {
			mu.Lock()
			defer mu.Unlock()
			if victims[nc.RemoteAddr().String()] {
				return victim
			}
			return attacker
		}
	})
	v, vr := dial(t, ts.addr)
	mu.Lock()
	victims[v.LocalAddr().String()] = true
	mu.Unlock()
	roundTrip(t, v, vr, "use bvictim")
	if got := roundTrip(t, v, vr, "put 0 0 60 6\r\nsecret"); got != "INSERTED 1" {
		t.Fatal(got)
	}
	roundTrip(t, v, vr, "watch bvictim")
	roundTrip(t, v, vr, "ignore default")
	if got := roundTrip(t, v, vr, "reserve-with-timeout 0"); got != "RESERVED 1 6" {
		t.Fatal(got)
	}
	vr.ReadString('\n')
	before := statsJob(t, v, vr)

	for cmd, want := range map[string]string{
		"release 1 0 3600": "NOT_FOUND", // not held by this connection
		"bury 1 0":         "NOT_FOUND",
		"touch 1":          "NOT_FOUND",
		"delete 1":         "UNAUTHORIZED",
		"kick-job 1":       "UNAUTHORIZED",
		"peek 1":           "UNAUTHORIZED",
		"stats-job 1":      "UNAUTHORIZED",
		"reserve-job 1":    "UNAUTHORIZED",
	} {
		c, r := dial(t, ts.addr)
		if got := roundTrip(t, c, r, cmd); got != want {
			t.Errorf("attacker %q = %q, want %q", cmd, got, want)
		}
	}
	// Commands on the tube itself need a scope on it too.
	for _, cmd := range []string{"peek-ready", "peek-buried", "kick 10", "pause-tube bvictim 60", "stats-tube bvictim"} {
		c, r := dial(t, ts.addr)
		roundTrip(t, c, r, "use bvictim")
		if got := roundTrip(t, c, r, cmd); got != "UNAUTHORIZED" {
			t.Errorf("attacker %q on bvictim = %q, want UNAUTHORIZED", cmd, got)
		}
	}
	c, r := dial(t, ts.addr)
	roundTrip(t, c, r, "watch bvictim")
	if got := roundTrip(t, c, r, "reserve-with-timeout 0"); got != "UNAUTHORIZED" {
		t.Errorf("attacker's reserve watching bvictim = %q", got)
	}

	// The job is as it was, and its holder finishes it.
	after := statsJob(t, v, vr)
	for _, want := range []string{"state: reserved", "releases: 0", "buries: 0", "kicks: 0", "reserves: 1"} {
		if !strings.Contains(after, want) {
			t.Errorf("stats-job after the attack lacks %q:\n%s", want, after)
		}
	}
	if !strings.Contains(before, "state: reserved") {
		t.Errorf("stats-job before the attack: %s", before)
	}
	if got := roundTrip(t, v, vr, "delete 1"); got != "DELETED" {
		t.Fatalf("the holder's delete = %q", got)
	}
}

// statsJob returns the YAML of stats-job 1.
func statsJob(t *testing.T, c net.Conn, r *bufio.Reader) string {
	t.Helper()
	header := roundTrip(t, c, r, "stats-job 1")
	var n int
	if _, err := fmt.Sscanf(header, "OK %d", &n); err != nil {
		t.Fatalf("stats-job = %q", header)
	}
	buf := make([]byte, n+2)
	if _, err := io.ReadFull(r, buf); err != nil {
		t.Fatal(err)
	}
	return string(buf)
}
