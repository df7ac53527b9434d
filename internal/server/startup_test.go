package server

import (
	"context"
	"errors"
	"log/slog"
	"testing"
)

type closer struct{ closed chan struct{} }

func (c *closer) Close() error { close(c.closed); return nil }

// TestOpenInterruptible: a SIGTERM (ctx cancelled) while the store is
// still opening ends the start at once, and the store the open returns
// later is closed, not leaked.
func TestOpenInterruptible(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	release := make(chan struct{})
	c := &closer{closed: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		_, err := openInterruptible(ctx, slog.New(slog.DiscardHandler), func() (*closer, error) {
			<-release // an open that does not end by itself
			return c, nil
		})
		errc <- err
	}()
	stop := errors.New("SIGTERM")
	cancel(stop)
	if err := <-errc; !errors.Is(err, stop) {
		t.Fatalf("openInterruptible after cancel = %v, want an error naming the cause", err)
	}
	close(release)
	<-c.closed // the late store is closed (the test hangs, and times out, if not)

	st, err := openInterruptible(t.Context(), slog.New(slog.DiscardHandler), func() (*closer, error) { return c, nil })
	if err != nil || st != c {
		t.Errorf("openInterruptible without cancel = %v, %v; want the store", st, err)
	}
}
