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

// authOps maps each beanstalkd command to its operation in auth's table
// (a test keeps every command of prefixes in it): what each needs is
// auth's to say, for every protocol alike. delete is OpFinish for a job
// this connection reserved (authorize), OpDelete (a revoke) otherwise.
var authOps = map[op]auth.Op{
	opPut:                auth.OpPut,
	opReserve:            auth.OpReserve,
	opReserveWithTimeout: auth.OpReserve,
	opReserveJob:         auth.OpReserveJob,
	opDelete:             auth.OpDelete,
	opRelease:            auth.OpRelease,
	opBury:               auth.OpBury,
	opTouch:              auth.OpTouch,
	opKick:               auth.OpKick,
	opKickJob:            auth.OpKickJob,
	opPeek:               auth.OpGet,
	opStatsJob:           auth.OpGet,
	opPeekReady:          auth.OpList,
	opPeekDelayed:        auth.OpList,
	opPeekBuried:         auth.OpList,
	opStatsTube:          auth.OpTopic,
	opPauseTube:          auth.OpPause,
	opStats:              auth.OpStats,
	opListTubes:          auth.OpTopics,
	opUse:                auth.OpConnection,
	opWatch:              auth.OpConnection,
	opIgnore:             auth.OpConnection,
	opListTubeUsed:       auth.OpConnection,
	opListTubesWatched:   auth.OpConnection,
	opQuit:               auth.OpConnection,
}

// authorize checks a parsed command against the principal's scopes, as
// auth's table says for the command's operation.
func (c *conn) authorize(cmd *command) bool {
	p := c.principal
	if p == auth.Open {
		return true
	}
	o, known := authOps[cmd.op]
	need, _ := auth.NeedOf(o)
	ok := false
	var lookErr error // a job lookup that failed: answered, not refused
	switch {
	case !known:
		// Refused: TestEveryCommandHasAnOperation keeps this unreached.
	case cmd.op == opDelete:
		// delete of a job this connection reserved is a finish: the
		// reservation proves the job's topic was checked when it was
		// reserved. Any other delete is a revoke.
		_, mine := c.held[cmd.id]
		ok = mine && p.MaySome(auth.OpFinish)
		if !ok {
			ok, lookErr = c.jobAllows(cmd.id, auth.OpDelete)
		}
	case cmd.op == opRelease, cmd.op == opBury, cmd.op == opTouch:
		// Only a job this connection reserved can be acted on, and
		// reserving it checked its tube.
		ok = p.MaySome(o)
	case need.On == auth.OnJobs:
		ok, lookErr = c.jobAllows(cmd.id, o)
	case need.On == auth.OnTopics:
		ok = true
		for _, t := range c.topicsOf(cmd) {
			ok = ok && p.May(o, t)
		}
	default:
		ok = p.MayAll(o)
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

// topicsOf names the tubes a command acts on: the watched ones for a
// reserve, the one it names for stats-tube and pause-tube, the used one
// otherwise.
func (c *conn) topicsOf(cmd *command) []string {
	switch cmd.op {
	case opReserve, opReserveWithTimeout:
		return c.watch
	case opStatsTube, opPauseTube:
		return []string{cmd.tube}
	}
	return []string{c.use}
}

// jobAllows looks a job up to learn its tube. A job that does not exist
// passes, so the command answers NOT_FOUND as it would anyway; a lookup
// that fails otherwise (the store unreachable) returns its error, which
// the command is answered with: it must not pass unchecked. A job's seq
// is unique forever and its tube never changes, so the job the command
// then acts on is the one checked here.
func (c *conn) jobAllows(seq uint64, o auth.Op) (bool, error) {
	if c.principal.MayAll(o) {
		return true, nil
	}
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	j, err := c.liveJob(ctx, seq)
	if errors.Is(err, delayq.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return c.principal.May(o, j.Topic), nil
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
