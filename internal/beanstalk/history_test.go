package beanstalk

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// TestRetainedJobIsNotFound: a job deleted by the connection that holds
// it is kept as finished (--retain), with its attempt naming the
// connection, yet beanstalkd has no such state: peek, stats-job,
// kick-job and delete answer NOT_FOUND as beanstalkd would.
func TestRetainedJobIsNotFound(t *testing.T) {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	e := engine.New(memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour, Bodies: true}}), engine.Config{Logger: logger})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Engine: e, Logger: logger}
	runUntilCleanup(t, e, s, l)

	c, r := dial(t, l.Addr().String())
	if got := roundTrip(t, c, r, "put 0 0 60 2\r\nhi"); got != "INSERTED 1" {
		t.Fatalf("put = %q", got)
	}
	if got := roundTrip(t, c, r, "reserve"); got != "RESERVED 1 2" {
		t.Fatalf("reserve = %q", got)
	}
	if body, err := r.ReadString('\n'); err != nil || body != "hi\r\n" {
		t.Fatalf("reserved body = %q, %v", body, err)
	}
	if got := roundTrip(t, c, r, "delete 1"); got != "DELETED" {
		t.Fatalf("delete 1 = %q", got)
	}
	for _, cmd := range []string{"peek 1", "stats-job 1", "kick-job 1", "delete 1", "reserve-job 1"} {
		if got := roundTrip(t, c, r, cmd); got != "NOT_FOUND" {
			t.Errorf("%s of a finished (retained) job = %q, want NOT_FOUND", cmd, got)
		}
	}
	j, err := e.Get(context.Background(), delayq.Ref{Seq: 1})
	if err != nil || j.State != delayq.StateFinished {
		t.Fatalf("Get(#1) = %v, %v; want the job kept as finished", j, err)
	}
	if len(j.History) != 1 || j.History[0].By != "beanstalk "+c.LocalAddr().String() || j.History[0].Outcome != delayq.OutcomeFinished {
		t.Errorf("Get(#1).History = %+v, want one finished attempt by beanstalk %s", j.History, c.LocalAddr())
	}
	if got := roundTrip(t, c, r, "peek-ready"); !strings.HasPrefix(got, "NOT_FOUND") {
		t.Errorf("peek-ready with only a finished job = %q, want NOT_FOUND", got)
	}
}
