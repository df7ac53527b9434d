package client

import (
	"errors"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/google/uuid"
)

func TestProducer(t *testing.T) {
	t.Parallel()
	srv, c := newTestClient(t)
	p := c.Producer()
	ctx := t.Context()

	t.Run("delay generates a UUIDv7 id", func(t *testing.T) {
		id, err := p.Delay(ctx, "orders", []byte("x"), time.Minute)
		if err != nil {
			t.Fatalf("Delay = %v", err)
		}
		if u, err := uuid.Parse(id); err != nil || u.Version() != 7 {
			t.Errorf("Delay id = %q, want a UUIDv7", id)
		}
		j, err := p.Get(ctx, id)
		if err != nil || j.State != delayq.StateDelayed || time.Until(j.Due) < 50*time.Second {
			t.Errorf("Get = %+v, %v; want delayed about a minute", j, err)
		}
	})
	t.Run("at with options", func(t *testing.T) {
		at := time.Now().Add(time.Hour).Truncate(time.Millisecond)
		id, err := p.At(ctx, "orders", []byte("o"), at, ID("orders-42"), TTR(7*time.Second), Priority(3), MaxAttempts(2))
		if err != nil || id != "orders-42" {
			t.Fatalf("At = %q, %v; want orders-42", id, err)
		}
		j, _ := p.Get(ctx, id)
		if !j.Due.Equal(at) || j.TTR != 7*time.Second || j.Priority != 3 || j.MaxAttempts != 2 {
			t.Errorf("Get = due %v ttr %v pri %d max %d; want %v 7s 3 2", j.Due, j.TTR, j.Priority, j.MaxAttempts, at)
		}
	})
	t.Run("duplicate id", func(t *testing.T) {
		_, err := p.Delay(ctx, "orders", nil, 0, ID("orders-42"))
		if !errors.Is(err, delayq.ErrExists) {
			t.Errorf("second put of orders-42 = %v, want ErrExists", err)
		}
	})
	t.Run("update", func(t *testing.T) {
		d := time.Duration(0)
		j, err := p.Update(ctx, "orders-42", UpdateRequest{Delay: &d, Priority: ptr[uint32](1)})
		if err != nil || j.State != delayq.StateReady || j.Priority != 1 {
			t.Errorf("Update = %+v, %v; want ready, priority 1", j, err)
		}
	})
	t.Run("revoke", func(t *testing.T) {
		err := p.Revoke(ctx, "orders-42", "never-was")
		if !errors.Is(err, delayq.ErrNotFound) {
			t.Errorf("Revoke(orders-42, never-was) = %v, want ErrNotFound for never-was", err)
		}
		// Kept as deleted for the server's --retain (1h by default), its
		// id still taken.
		if j, err := p.Get(ctx, "orders-42"); err != nil || j.State != delayq.StateDeleted || j.Ended.IsZero() {
			t.Errorf("Get after Revoke = %+v, %v; want the job, deleted, with when it ended", j, err)
		}
		_, err = p.Delay(ctx, "orders", nil, 0, ID("orders-42"))
		if !errors.Is(err, delayq.ErrExists) || ExistingState(err) != delayq.StateDeleted {
			t.Errorf("put of the revoked orders-42 = %v (state %q), want ErrExists, state deleted", err, ExistingState(err))
		}
	})
	t.Run("batch", func(t *testing.T) {
		ids, err := p.PutBatch(ctx, "batch", []PutRequest{{ID: "b-1"}, {Body: []byte("2")}, {Delay: time.Hour}})
		if err != nil || len(ids) != 3 || ids[0] != "b-1" || ids[1] == "" {
			t.Fatalf("PutBatch = %v, %v", ids, err)
		}
		top, _ := c.Topic(ctx, "batch")
		if top.Ready != 2 || top.Delayed != 1 {
			t.Errorf("topic after batch = %+v, want 2 ready 1 delayed", top)
		}
	})
	_ = srv
}

func TestNewProducerTakesPlainAddresses(t *testing.T) {
	t.Parallel()
	srv := delayqtestServer(t)
	p := NewProducer(srv.Addr) // "127.0.0.1:port", no scheme
	defer p.Client().Close()
	if _, err := p.Delay(t.Context(), "t", []byte("x"), 0); err != nil {
		t.Errorf("Delay via %q = %v", srv.Addr, err)
	}
}
