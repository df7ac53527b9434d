// Package audit writes the audit trail: one structured log record for every
// change an operator or a token makes outside the job hot path (deleting a
// job the caller does not hold, purges, kicks, pauses and resumes, policy,
// schedule and alarm changes, token reloads, backups), on every protocol
// that can make one. A record is always written, whatever --log-level says:
// it carries audit=true, the action, the target, the outcome, and who made
// the change from where (docs/operations.md lists the actions).
//
// The front ends know who is calling; they put an Actor in the request's
// context and log through Log once the change has an outcome.
package audit

import (
	"context"
	"log/slog"
	"runtime"
	"time"

	"github.com/delayq/delayq"
)

// Actor is who makes a change, and over what.
type Actor struct {
	// Principal names the token's or certificate's entry of the auth
	// file ("open" on a server without tokens); empty when the request
	// was refused before it was authenticated.
	Principal string
	// Protocol is "http" (the /v1 API), "json" (the original protocol),
	// "grpc" (the gRPC API, any of its wire protocols), "beanstalk" or
	// "signal" (SIGHUP).
	Protocol string
	// Remote is the client's address, host:port.
	Remote string
}

type actorKey struct{}

// WithActor returns ctx carrying a. The front ends set a's fields as they
// learn them (the principal once authenticated), so a is shared, not
// copied: it belongs to one request or connection.
func WithActor(ctx context.Context, a *Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorOf returns the Actor of ctx, or nil.
func ActorOf(ctx context.Context) *Actor {
	a, _ := ctx.Value(actorKey{}).(*Actor)
	return a
}

// OK is the outcome of a change that was made.
const OK = "ok"

// Outcome is OK for a nil err, else err's code (not_found, forbidden, ...).
func Outcome(err error) string {
	if err == nil {
		return OK
	}
	return delayq.CodeOf(err)
}

// Log writes one audit record to log: message "audit", audit=true, action
// (e.g. "topic.purge"), target (e.g. "topic:orders"), outcome (OK or an
// error code), the actor's principal, protocol and remote address, then
// extra. It bypasses the logger's level, so --log-level cannot turn the
// audit trail off; a nil log writes nothing.
func Log(ctx context.Context, log *slog.Logger, a *Actor, action, target, outcome string, extra ...slog.Attr) {
	if log == nil {
		return
	}
	if a == nil {
		a = &Actor{}
	}
	var pcs [1]uintptr
	runtime.Callers(2, pcs[:]) // the caller, for AddSource handlers
	r := slog.NewRecord(time.Now(), slog.LevelInfo, "audit", pcs[0])
	r.AddAttrs(slog.Bool("audit", true), slog.String("action", action), slog.String("target", target),
		slog.String("outcome", outcome), slog.String("principal", a.Principal),
		slog.String("protocol", a.Protocol), slog.String("remote", a.Remote))
	r.AddAttrs(extra...)
	_ = log.Handler().Handle(ctx, r)
}
