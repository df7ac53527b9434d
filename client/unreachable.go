package client

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"strings"
	"syscall"

	"github.com/delayq/delayq"
)

// unreachableError is a call that got no answer from a server. Its text
// says what a person needs ("cannot reach delayq at 127.0.0.1:7499:
// connection refused"); errors.Is matches delayq.ErrUnavailable and the
// transport's own error.
type unreachableError struct {
	addr string // host:port
	sent bool   // the request may have reached the server
	err  error
}

func (e *unreachableError) Error() string {
	if e.sent {
		return "lost the connection to delayq at " + e.addr + ": " + shortCause(e.err)
	}
	return "cannot reach delayq at " + e.addr + ": " + shortCause(e.err)
}

func (e *unreachableError) Unwrap() []error { return []error{delayq.ErrUnavailable, e.err} }

// shortCause names why a connection failed in a few words: the system's
// own ("connection refused"), not the layers of wrapping around it.
func shortCause(err error) string {
	var errno syscall.Errno
	var dns *net.DNSError
	var ne net.Error
	var ue *url.Error
	switch {
	case errors.As(err, &dns):
		return "cannot resolve " + dns.Name + ": " + dns.Err
	case errors.As(err, &errno):
		return errno.Error()
	case errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout():
		return "timed out"
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return "the server closed the connection"
	case errors.As(err, &ue):
		return ue.Err.Error()
	}
	return err.Error()
}

// hostOf is base's host:port, for messages.
func hostOf(base string) string {
	if u, err := url.Parse(base); err == nil && u.Host != "" {
		return u.Host
	}
	return strings.TrimPrefix(strings.TrimPrefix(base, "http://"), "https://")
}
