package server

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/sdnotify"
)

// notifySystemd tells systemd (Type=notify, docs/deploy.md) that the
// server serves, and keeps its watchdog fed while no part has failed.
// It returns the function that says STOPPING=1 and stops the pings; with
// no $NOTIFY_SOCKET both do nothing.
func (s *Server) notifySystemd() (stopping func()) {
	n := sdnotify.FromEnv()
	if n == nil {
		return func() {}
	}
	status := "serving HTTP on " + s.httpLn.Addr().String()
	if s.beanstalkLn != nil {
		status += ", beanstalkd on " + s.beanstalkLn.Addr().String()
	}
	if err := n.Ready(status); err != nil {
		s.log.Warn("systemd notification failed", "err", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The pings prove the process runs and no part of the server
		// has stopped on its own (s.failed); a store outage is no reason
		// for systemd to restart it (readyz reports that).
		n.Watchdog(ctx, sdnotify.WatchdogInterval(), func() error {
			if err := context.Cause(s.failed); err != nil {
				return fmt.Errorf("server part failed: %w", err)
			}
			return nil
		})
	}()
	return func() {
		cancel()
		<-done
		if err := n.Stopping("shutting down"); err != nil {
			s.log.Warn("systemd notification failed", "err", err)
		}
	}
}
