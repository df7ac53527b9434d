package client

import (
	"errors"
	"net"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/delayqtest"
	"github.com/google/go-cmp/cmp"
)

// newTestClient starts a server and returns it with a client for it.
func newTestClient(t *testing.T, opts ...Option) (*delayqtest.Server, *Client) {
	t.Helper()
	srv := delayqtest.NewServer(t)
	c := New([]string{srv.URL}, opts...)
	t.Cleanup(c.Close)
	return srv, c
}

func TestNormalizeAddr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		wantErr        bool
	}{
		{name: "host port", in: "127.0.0.1:7480", want: "http://127.0.0.1:7480"},
		{name: "url", in: "http://example.com:7480/", want: "http://example.com:7480"},
		{name: "https with path", in: "https://example.com/delayq/", want: "https://example.com/delayq"},
		{name: "spaces", in: " localhost:1 ", want: "http://localhost:1"},
		{name: "empty", in: "", wantErr: true},
		{name: "bad scheme", in: "ftp://x:1", wantErr: true},
		{name: "query", in: "http://x:1/?a=b", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := normalizeAddr(tt.in)
			if (err != nil) != tt.wantErr || got != tt.want {
				t.Errorf("normalizeAddr(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestNewClientRejectsBadAddresses(t *testing.T) {
	t.Parallel()
	if _, err := NewClient(nil); err == nil {
		t.Error("NewClient(nil) = nil error, want one")
	}
	if _, err := NewClient([]string{"ftp://x"}); err == nil {
		t.Error(`NewClient("ftp://x") = nil error, want one`)
	}
}

func TestClientEndpoints(t *testing.T) {
	t.Parallel()
	_, c := newTestClient(t)
	ctx := t.Context()
	body := []byte{0xff, 0x00, 'x'} // not UTF-8: travels as body_base64
	put, err := c.Put(ctx, "mail/welcome", PutRequest{ID: "a-1", Body: body, Delay: time.Hour, Priority: ptr[uint32](7), TTR: 5 * time.Second, MaxAttempts: 3})
	if err != nil {
		t.Fatalf("Put = %v", err)
	}
	j, err := c.Get(ctx, "a-1")
	if err != nil {
		t.Fatalf("Get = %v", err)
	}
	got := []any{j.ID, j.Seq, j.Topic, j.Body, j.State, j.Priority, j.TTR, j.MaxAttempts}
	want := []any{"a-1", put.Seq, "mail/welcome", body, delayq.StateDelayed, uint32(7), 5 * time.Second, 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get after Put (-want +got):\n%s", diff)
	}
	if d := time.Until(j.Due); d < 59*time.Minute || d > time.Hour+time.Millisecond { // rounded up to the ms
		t.Errorf("Due in %v, want about 1h", d)
	}

	// A due time already past, so the job is ready at once: "now" by this
	// clock is rounded up to the next millisecond (never early), which the
	// server's clock may not have reached yet.
	past := time.Now().Add(-time.Second)
	if j, err = c.Update(ctx, "a-1", UpdateRequest{At: &past, Body: []byte("new")}); err != nil {
		t.Fatalf("Update = %v", err)
	}
	jobs, next, err := c.List(ctx, "mail/welcome", ListRequest{State: delayq.StateReady})
	if err != nil || next != "" || len(jobs) != 1 || string(jobs[0].Body) != "new" {
		t.Fatalf("List(ready) = %v, %q, %v; want the updated job", jobs, next, err)
	}
	ts, err := c.Topics(ctx)
	if err != nil || len(ts) != 1 || ts[0].Name != "mail/welcome" || ts[0].Ready != 1 {
		t.Errorf("Topics = %+v, %v; want mail/welcome with 1 ready", ts, err)
	}
	res, err := c.Reserve(ctx, []string{"mail/welcome"}, 10, 0)
	if err != nil || len(res) != 1 || res[0].Reservation == "" || res[0].Deadline.IsZero() {
		t.Fatalf("Reserve = %v, %v; want the job with a reservation and deadline", res, err)
	}
	if _, err := c.Touch(ctx, "a-1", res[0].Reservation); err != nil {
		t.Errorf("Touch = %v", err)
	}
	if _, err := c.Bury(ctx, "a-1", res[0].Reservation, nil); err != nil {
		t.Errorf("Bury = %v", err)
	}
	if n, err := c.Kick(ctx, "mail/welcome", 5); n != 1 || err != nil {
		t.Errorf("Kick = %d, %v; want 1", n, err)
	}
	top, err := c.Topic(ctx, "mail/welcome")
	if err != nil || top.Ready != 1 {
		t.Errorf("Topic = %+v, %v; want 1 ready", top, err)
	}
	if err := c.Delete(ctx, "a-1"); err != nil {
		t.Errorf("Delete = %v", err)
	}
	// A finish sent again with the same reservation (its answer lost)
	// succeeds: the server kept the job as finished by that reservation.
	if _, err := c.Put(ctx, "mail/welcome", PutRequest{ID: "twice"}); err != nil {
		t.Fatal(err)
	}
	held, err := c.Reserve(ctx, []string{"mail/welcome"}, 1, 0)
	if err != nil || len(held) != 1 || held[0].ID != "twice" {
		t.Fatalf("Reserve = %v, %v; want twice", held, err)
	}
	for i := range 2 {
		if err := c.Finish(ctx, "twice", held[0].Reservation); err != nil {
			t.Errorf("Finish #%d of the same reservation = %v, want success", i+1, err)
		}
	}
	// Kick retries buried jobs only; KickDelayed fires delayed ones.
	if _, err := c.Put(ctx, "mail/welcome", PutRequest{ID: "later", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Kick(ctx, "mail/welcome", 5); n != 0 || err != nil {
		t.Errorf("Kick with none buried = %d, %v; want 0 (the delayed job stays)", n, err)
	}
	if n, err := c.KickDelayed(ctx, "mail/welcome", 5); n != 1 || err != nil {
		t.Errorf("KickDelayed = %d, %v; want 1", n, err)
	}
	if err := c.Health(ctx); err != nil {
		t.Errorf("Health = %v", err)
	}
	if in, err := c.Cluster(ctx); err != nil || len(in) != 1 {
		t.Errorf("Cluster = %v, %v; want this instance", in, err)
	}
}

func TestClientErrorsMatchSentinels(t *testing.T) {
	t.Parallel()
	_, c := newTestClient(t)
	ctx := t.Context()
	if _, err := c.Put(ctx, "t", PutRequest{ID: "dup"}); err != nil {
		t.Fatal(err)
	}
	_, errDup := c.Put(ctx, "t", PutRequest{ID: "dup"})
	_, errGet := c.Get(ctx, "nope")
	res, _ := c.Reserve(ctx, []string{"t"}, 1, 0)
	errFinish := c.Finish(ctx, "dup", res[0].Reservation+"x")
	_, errTopic := c.Put(ctx, "-bad", PutRequest{})
	_, errKick := c.KickJob(ctx, "dup")
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"duplicate id", errDup, delayq.ErrExists},
		{"unknown id", errGet, delayq.ErrNotFound},
		{"stale reservation", errFinish, delayq.ErrNotReserved},
		{"bad topic", errTopic, delayq.ErrInvalid},
		{"kick reserved", errKick, delayq.ErrState},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !errors.Is(tt.err, tt.want) {
				t.Errorf("err = %v, want errors.Is %v", tt.err, tt.want)
			}
		})
	}
}

func TestReserveLongPollsUntilPut(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	ctx := t.Context()
	type result struct {
		jobs []*delayq.Job
		err  error
	}
	done := make(chan result, 1)
	go func() {
		jobs, err := c.Reserve(ctx, []string{"lp"}, 1, 10*time.Second)
		done <- result{jobs, err}
	}()
	// The reserve is parked on the server (seen, not guessed) before the
	// put: it must return with the job put after it started waiting.
	waitFor(t, "the reserve long-polling", func() bool { return srv.Engine().Waiting("lp") == 1 })
	select {
	case r := <-done:
		t.Fatalf("Reserve returned %v, %v before any put", r.jobs, r.err)
	default:
	}
	put := time.Now()
	if _, err := c.Put(ctx, "lp", PutRequest{ID: "lp-1"}); err != nil {
		t.Fatalf("Put = %v", err)
	}
	r := <-done
	if r.err != nil || len(r.jobs) != 1 || r.jobs[0].ID != "lp-1" {
		t.Fatalf("Reserve = %v, %v; want lp-1", r.jobs, r.err)
	}
	if took := time.Since(put); took > 5*time.Second {
		t.Errorf("Reserve returned %v after the put, want at the put", took)
	}
}

// delayqtestServer starts an in-process server for t.
func delayqtestServer(t *testing.T) *delayqtest.Server {
	t.Helper()
	return delayqtest.NewServer(t)
}

// TestUnreachableMessage: a server that is down is reported as such, with
// its address and the system's reason, and still matches ErrUnavailable.
func TestUnreachableMessage(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	c := New([]string{addr}, CallAttempts(1))
	_, err = c.Get(t.Context(), "x")
	want := "cannot reach delayq at " + addr + ": connection refused"
	if err == nil || err.Error() != want || !errors.Is(err, delayq.ErrUnavailable) {
		t.Errorf("Get from a down server = %v, want %q matching ErrUnavailable", err, want)
	}
}

// TestRemoteErrorMessage: an error answered by the server reads as the
// problem, without codes or layers.
func TestRemoteErrorMessage(t *testing.T) {
	t.Parallel()
	_, c := newTestClient(t)
	_, err := c.Get(t.Context(), "nosuch")
	if err == nil || err.Error() != `job "nosuch" not found` || !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get(nosuch) = %v, want job \"nosuch\" not found matching ErrNotFound", err)
	}
}
