package beanstalk

import (
	"bytes"
	"context"
	"errors"
	"net"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/auth"
)

// errUnauthorized answers a command the connection's principal may not
// run; the connection is closed after it. beanstalkd has no authentication
// and so no word for it: client libraries report the line as an error.
const errUnauthorized protoError = "UNAUTHORIZED"

// httpPrefixes start the first line of an HTTP request, and "host:" one of
// its headers. No beanstalkd command starts with any of them, so a line
// that does is a browser (or a confused client) talking HTTP to this
// port: a web page can POST to any host:port, and the request's body would
// otherwise run as commands (the header lines being merely unknown ones).
// Redis closes such connections the same way.
var httpPrefixes = [][]byte{
	[]byte("get "), []byte("post "), []byte("put /"), []byte("head "), []byte("options "),
	[]byte("patch "), []byte("connect "), []byte("trace "), []byte("delete /"), []byte("host:"),
}

// looksLikeHTTP reports whether a command line is part of an HTTP request.
func looksLikeHTTP(line []byte) bool {
	for _, p := range httpPrefixes {
		if len(line) >= len(p) && bytes.EqualFold(line[:len(p)], p) {
			return true
		}
	}
	return false
}

// admit learns the connection's principal once, before its first command
// (after the TLS handshake, which the first read ran). Without Admit every
// connection may do everything.
func (c *conn) admit() {
	if c.admitted {
		return
	}
	c.admitted = true
	c.principal = auth.Open
	if c.srv.Admit != nil {
		c.principal = c.srv.Admit(c.ctx, c.nc)
	}
	c.rateKey = "addr:" + hostOf(c.remote)
	if c.principal != nil && c.principal != auth.Open {
		c.rateKey = "token:" + c.principal.Name
	}
}

func hostOf(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// guard runs before a command: it closes a connection that speaks HTTP,
// slows a connection over its request rate (beanstalkd has no reply that
// says "slow down", so the command waits its turn), and refuses commands
// the principal has no scope for. A refusal closes the connection.
func (c *conn) guard(line []byte) bool {
	if looksLikeHTTP(line) {
		c.srv.logger().Warn("beanstalk: closed a connection that sent HTTP (a web page posting to this port?)", "remote", c.remote)
		c.quit = true
		return false
	}
	c.admit()
	if err := c.srv.Rates.Wait(c.ctx, c.rateKey); err != nil {
		c.quit = true // the connection or the server is closing
		return false
	}
	return true
}

// authorize checks a parsed command against the principal's scopes.
func (c *conn) authorize(cmd *command) bool {
	p := c.principal
	if p == auth.Open {
		return true
	}
	ok := false
	var lookErr error // a job lookup that failed: answered, not refused
	switch cmd.op {
	case opQuit, opUse, opWatch, opIgnore, opListTubeUsed, opListTubesWatched:
		ok = p != nil // connection state only
	case opPut:
		ok = p.Allows(auth.Produce, c.use)
	case opReserve, opReserveWithTimeout:
		ok = true
		for _, t := range c.watch {
			ok = ok && p.Allows(auth.Consume, t)
		}
	case opRelease, opBury, opTouch:
		// Only a job this connection reserved can be acted on, and
		// reserving it needed consume on its tube.
		ok = p.AllowsSome(auth.Consume)
	case opDelete:
		_, mine := c.held[cmd.id]
		ok = mine && p.AllowsSome(auth.Consume)
		if !ok {
			ok, lookErr = c.jobAllows(cmd.id, auth.Produce, auth.Admin)
		}
	case opReserveJob:
		ok, lookErr = c.jobAllows(cmd.id, auth.Consume)
	case opKickJob:
		ok, lookErr = c.jobAllows(cmd.id, auth.Admin)
	case opPeek, opStatsJob:
		ok, lookErr = c.jobAllows(cmd.id, auth.Read)
	case opPeekReady, opPeekDelayed, opPeekBuried:
		ok = p.Allows(auth.Read, c.use)
	case opKick:
		ok = p.Allows(auth.Admin, c.use)
	case opStatsTube:
		ok = p.Allows(auth.Read, cmd.tube)
	case opPauseTube:
		ok = p.Allows(auth.Admin, cmd.tube)
	case opStats, opListTubes:
		ok = p.AllowsAll(auth.Read)
	}
	if lookErr != nil {
		c.reply(lookErr)
		return false
	}
	if !ok {
		name := "nobody (no client certificate that maps to a token)"
		if p != nil {
			name = p.Name
		}
		c.srv.logger().Info("beanstalk: command refused; closing the connection", "remote", c.remote, "principal", name, "command", opName(cmd.op))
		c.reply(errUnauthorized)
		c.quit = true
	}
	return ok
}

// jobAllows looks a job up to learn its tube. A job that does not exist
// passes, so the command answers NOT_FOUND as it would anyway; a lookup
// that fails otherwise (the store unreachable) returns its error, which
// the command is answered with: it must not pass unchecked. A job's seq
// is unique forever and its tube never changes, so the job the command
// then acts on is the one checked here.
func (c *conn) jobAllows(seq uint64, scopes ...auth.Scope) (bool, error) {
	for _, s := range scopes {
		if c.principal.AllowsAll(s) {
			return true, nil
		}
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	j, err := c.srv.Engine.Get(ctx, delayq.Ref{Seq: seq})
	if errors.Is(err, delayq.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	for _, s := range scopes {
		if c.principal.Allows(s, j.Topic) {
			return true, nil
		}
	}
	return false, nil
}

// idleDeadline is when an idle connection is closed: IdleTimeout from now,
// or never while it holds reserved jobs (a worker busy with a long job
// sends nothing, and closing it would hand its job to another worker).
func (c *conn) idleDeadline() time.Time {
	if len(c.held) > 0 {
		return time.Time{}
	}
	return time.Now().Add(c.srv.limits.IdleTimeout)
}

// opName is the command's word, for logs.
func opName(o op) string {
	for _, p := range prefixes {
		if p.op == o {
			return string(bytes.TrimSpace([]byte(p.text)))
		}
	}
	return "unknown"
}
