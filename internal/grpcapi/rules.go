package grpcapi

import (
	"context"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
)

// ops maps each method of DelayQService to its operation in auth's scope
// table, the one every protocol uses: the same operation as the HTTP
// route it mirrors, so a token may do the same over both.
// TestEveryMethodHasAnOp keeps this table and the service equal.
var ops = map[string]auth.Op{
	delayqv1connect.DelayQServicePutProcedure:         auth.OpPut,
	delayqv1connect.DelayQServicePutBatchProcedure:    auth.OpPut,
	delayqv1connect.DelayQServiceReserveProcedure:     auth.OpReserve,
	delayqv1connect.DelayQServiceFinishProcedure:      auth.OpFinish,
	delayqv1connect.DelayQServiceFinishBatchProcedure: auth.OpFinish, // each entry checked against its job's topic
	delayqv1connect.DelayQServiceReleaseProcedure:     auth.OpRelease,
	delayqv1connect.DelayQServiceTouchProcedure:       auth.OpTouch,
	delayqv1connect.DelayQServiceBuryProcedure:        auth.OpBury,
	delayqv1connect.DelayQServiceKickProcedure:        auth.OpKickJob,
	delayqv1connect.DelayQServiceKickTopicProcedure:   auth.OpKick,
	delayqv1connect.DelayQServiceGetProcedure:         auth.OpGet,
	delayqv1connect.DelayQServiceUpdateProcedure:      auth.OpUpdate,
	delayqv1connect.DelayQServiceDeleteProcedure:      auth.OpDelete,
	delayqv1connect.DelayQServiceListProcedure:        auth.OpList,
}

func forbidden(msg string) error {
	return &refusal{code: delayq.CodeForbidden, msg: "forbidden: " + msg}
}

// allow decides whether p may run op with request message msg, as auth's
// table says: on the topics the request names (its topic or topics
// field), on every topic, or, for a call that names jobs by id, on some
// topic now and on each job's own topic in the engine's step that acts
// on it (engine.WithTopicCheck): checking before the call would leave a
// job deleted and put again in another topic meanwhile unchecked, and a
// reservation proves the caller holds a job, not that its token may use
// the job's topic. It returns the context to serve the call with.
func allow(ctx context.Context, p *auth.Principal, op auth.Op, msg any) (context.Context, error) {
	n, ok := auth.NeedOf(op)
	if !ok {
		return nil, forbidden("this call is not in the scope table")
	}
	switch n.On {
	case auth.OnTopics:
		var topics []string
		switch m := msg.(type) {
		case interface{ GetTopics() []string }:
			topics = m.GetTopics()
		case interface{ GetTopic() string }:
			topics = []string{m.GetTopic()}
		}
		if !p.MaySome(op) {
			return nil, forbidden(p.Denied(op, ""))
		}
		for _, t := range topics {
			if !p.May(op, t) {
				return nil, forbidden(p.Denied(op, t))
			}
		}
	case auth.OnJobs:
		if p.MayAll(op) {
			return ctx, nil // allowed on every topic: nothing to look up
		}
		if !p.MaySome(op) {
			return nil, forbidden(p.Denied(op, ""))
		}
		return engine.WithTopicCheck(ctx, func(topic string) error {
			if p.May(op, topic) {
				return nil
			}
			return delayq.ErrForbidden
		}), nil
	case auth.OnEvery:
		if !p.MayAll(op) {
			return nil, forbidden(p.Denied(op, ""))
		}
	}
	return ctx, nil
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
