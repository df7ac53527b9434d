// Package sdnotify speaks systemd's service notification protocol
// (sd_notify(3)) so delayq can run as a Type=notify unit: READY=1 once it
// serves, STOPPING=1 when a stop begins, WATCHDOG=1 while it is alive
// when the unit sets WatchdogSec.
//
// The protocol is a datagram of "KEY=VALUE" lines sent to the unix socket
// named by $NOTIFY_SOCKET (a leading '@' names an abstract socket). It is
// a few lines with the standard library, so delayq does not take
// github.com/coreos/go-systemd (and its D-Bus and journal packages) for
// them. Outside systemd (no $NOTIFY_SOCKET) every call does nothing.
package sdnotify

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// Notifier sends state changes to systemd. The zero value and nil are
// valid and send nothing.
type Notifier struct {
	socket string
}

// FromEnv returns a notifier for $NOTIFY_SOCKET, or nil when systemd (or
// anything else) did not set it.
func FromEnv() *Notifier {
	socket := os.Getenv("NOTIFY_SOCKET")
	if socket == "" {
		return nil
	}
	return &Notifier{socket: socket}
}

// Notify sends one message of newline-separated KEY=VALUE assignments,
// such as "READY=1\nSTATUS=serving". Each call is one datagram, as
// systemd wants: a state and its status arrive together.
func (n *Notifier) Notify(state string) error {
	if n == nil || n.socket == "" {
		return nil
	}
	// Go maps a leading '@' to Linux's abstract namespace, as systemd
	// means it.
	conn, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: n.socket, Net: "unixgram"})
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Write([]byte(state))
	return err
}

// Ready says the service is up, with a human-readable status line
// (systemctl status shows it).
func (n *Notifier) Ready(status string) error {
	return n.Notify("READY=1\nSTATUS=" + oneLine(status))
}

// Stopping says a graceful stop has begun.
func (n *Notifier) Stopping(status string) error {
	return n.Notify("STOPPING=1\nSTATUS=" + oneLine(status))
}

// oneLine keeps a status to one line: a newline would start a new
// assignment.
func oneLine(s string) string { return strings.ReplaceAll(s, "\n", " ") }

// WatchdogInterval returns how often systemd expects WATCHDOG=1: half of
// $WATCHDOG_USEC, as sd_watchdog_enabled(3) advises, or 0 when the
// watchdog is off or meant for another process ($WATCHDOG_PID).
func WatchdogInterval() time.Duration {
	usec, err := strconv.ParseInt(os.Getenv("WATCHDOG_USEC"), 10, 64)
	if err != nil || usec <= 0 {
		return 0
	}
	if pid := os.Getenv("WATCHDOG_PID"); pid != "" && pid != strconv.Itoa(os.Getpid()) {
		return 0
	}
	return time.Duration(usec) * time.Microsecond / 2
}

// Watchdog sends WATCHDOG=1 at once and then every interval while alive
// returns nil, until ctx ends. Once alive reports a failure it stops
// pinging (and says why in the status), so systemd sees the deadline
// pass and restarts the unit (WatchdogSec=, Restart=). Nothing happens
// with a nil notifier or a zero interval.
func (n *Notifier) Watchdog(ctx context.Context, interval time.Duration, alive func() error) {
	if n == nil || interval <= 0 {
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := alive(); err != nil {
			_ = n.Notify("STATUS=watchdog pings stopped: " + oneLine(err.Error()))
			return
		}
		// A failed send is a missed ping, which is what the watchdog
		// is there to notice.
		_ = n.Notify("WATCHDOG=1")
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
