package server

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
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

// TestStartLogNamesPickedPorts: with port 0 for every listener the start
// log names the ports picked, not :0, so an operator (or a script) can
// find them.
func TestStartLogNamesPickedPorts(t *testing.T) {
	cfg := testConfig(t)
	cfg.DebugAddr = "127.0.0.1:0"
	logs := &syncBuffer{}
	s := startServer(t, cfg, logs)
	var line string
	for l := range strings.SplitSeq(logs.String(), "\n") {
		if strings.Contains(l, `msg="delayq serving"`) {
			line = l
		}
	}
	for key, addr := range map[string]net.Addr{"http": s.Addr(), "beanstalk": s.BeanstalkAddr(), "debug": s.DebugAddr()} {
		if !strings.Contains(line, " "+key+"="+addr.String()+" ") {
			t.Errorf("the start log does not say %s=%s: %s", key, addr, line)
		}
	}
	if strings.Contains(line, ":0 ") {
		t.Errorf("the start log names a port 0: %s", line)
	}
}
