package grpcapi

import (
	"context"
	"fmt"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// rule decides whether p may make a call with request message msg; it
// returns the context to serve the call with (ctx, or ctx with the
// engine's check of each named job's topic: see onJob), or the refusal.
type rule func(ctx context.Context, p *auth.Principal, msg any) (context.Context, error)

// rules maps each method of DelayQService to the scope it needs: the same
// scope as the HTTP route it mirrors (docs/security.md), so a token may do
// the same over both. Calls that name a job by id check the scope against
// that job's own topic, in the engine's step that acts on it (onJob); the
// calls that act on a reservation included: a reservation proves the
// caller holds the job, not that its token may use the job's topic.
// TestEveryMethodHasARule keeps this table and the service equal.
var rules = map[string]rule{
	delayqv1connect.DelayQServicePutProcedure:         onTopic(auth.Produce),
	delayqv1connect.DelayQServicePutBatchProcedure:    onTopic(auth.Produce),
	delayqv1connect.DelayQServiceReserveProcedure:     onTopics(auth.Consume),
	delayqv1connect.DelayQServiceFinishProcedure:      onJob(auth.Consume),
	delayqv1connect.DelayQServiceFinishBatchProcedure: onJob(auth.Consume), // each entry checked against its job's topic
	delayqv1connect.DelayQServiceReleaseProcedure:     onJob(auth.Consume),
	delayqv1connect.DelayQServiceTouchProcedure:       onJob(auth.Consume),
	delayqv1connect.DelayQServiceBuryProcedure:        onJob(auth.Consume),
	delayqv1connect.DelayQServiceKickProcedure:        onJob(auth.Admin),
	delayqv1connect.DelayQServiceKickTopicProcedure:   onTopic(auth.Admin),
	delayqv1connect.DelayQServiceGetProcedure:         onJob(auth.Read),
	delayqv1connect.DelayQServiceUpdateProcedure:      onJob(auth.Admin),
	delayqv1connect.DelayQServiceDeleteProcedure:      onJob(auth.Produce, auth.Admin), // a producer revokes its jobs
	delayqv1connect.DelayQServiceListProcedure:        onTopic(auth.Read),
}

func forbidden(format string, args ...any) error {
	return &refusal{code: delayq.CodeForbidden, msg: "forbidden: " + fmt.Sprintf(format, args...)}
}

// onTopic checks s on the request's topic field.
func onTopic(s auth.Scope) rule {
	return func(ctx context.Context, p *auth.Principal, msg any) (context.Context, error) {
		t := msg.(interface{ GetTopic() string }).GetTopic()
		if !p.Allows(s, t) {
			return nil, forbidden("this token has no %s scope on topic %q", s, t)
		}
		return ctx, nil
	}
}

// onTopics checks s on every topic of the request's topics field.
func onTopics(s auth.Scope) rule {
	return func(ctx context.Context, p *auth.Principal, msg any) (context.Context, error) {
		if !p.AllowsSome(s) {
			return nil, forbidden("this call needs the %s scope", s)
		}
		for _, t := range msg.(interface{ GetTopics() []string }).GetTopics() {
			if !p.Allows(s, t) {
				return nil, forbidden("this token has no %s scope on topic %q", s, t)
			}
		}
		return ctx, nil
	}
}

// onJob lets a call that names jobs by id through when p has one of
// scopes on some topic, and has the engine check the topic of each job
// the call names (engine.WithTopicCheck) in the same step that acts on
// it, as the HTTP API does: checking before the call would leave a job
// deleted and put again in another topic meanwhile unchecked. A
// principal with a scope on every topic needs no check.
func onJob(scopes ...auth.Scope) rule {
	return func(ctx context.Context, p *auth.Principal, _ any) (context.Context, error) {
		some := false
		for _, s := range scopes {
			if p.AllowsAll(s) {
				return ctx, nil
			}
			some = some || p.AllowsSome(s)
		}
		if !some {
			return nil, forbidden("this call needs the %s scope", scopes[0])
		}
		return engine.WithTopicCheck(ctx, func(topic string) error {
			for _, s := range scopes {
				if p.Allows(s, topic) {
					return nil
				}
			}
			return delayq.ErrForbidden
		}), nil
	}
}

// hideReservations blanks the reservation of every job whose topic p may
// not consume from: a reservation lets its holder finish, release, touch
// or bury the job, which a token that may only read the topic must not be
// able to do by reading it.
func hideReservations(p *auth.Principal, jobs ...*delayq.Job) {
	if p == nil || p.AllowsAll(auth.Consume) {
		return
	}
	for _, j := range jobs {
		if j != nil && j.Reservation != "" && !p.Allows(auth.Consume, j.Topic) {
			j.Reservation = ""
		}
	}
}
