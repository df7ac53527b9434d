package grpcapi

import (
	"context"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
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

// topicsOf says, for the request message of every method whose
// operation is allowed by topic (auth.OnTopics), how its topics are found.
// A message missing here is refused to topic-scoped tokens (allow), and
// TestEveryTopicMethodIsListed walks the service descriptor so a new
// method cannot be added without an entry.
var topicsOf = topicTable(
	topic[*delayqv1.PutRequest](),
	topic[*delayqv1.PutBatchRequest](),
	topics[*delayqv1.ReserveRequest](),
	topic[*delayqv1.KickTopicRequest](),
	topic[*delayqv1.ListRequest](),
)

type topicEntry struct {
	name protoreflect.FullName
	of   func(any) []string
}

func topicTable(es ...topicEntry) map[protoreflect.FullName]func(any) []string {
	m := make(map[protoreflect.FullName]func(any) []string, len(es))
	for _, e := range es {
		m[e.name] = e.of
	}
	return m
}

// topic is the entry of a message that names one topic.
func topic[M interface {
	proto.Message
	GetTopic() string
}]() topicEntry {
	var zero M
	return topicEntry{zero.ProtoReflect().Descriptor().FullName(), func(m any) []string { return []string{m.(M).GetTopic()} }}
}

// topics is the entry of a message that names several topics.
func topics[M interface {
	proto.Message
	GetTopics() []string
}]() topicEntry {
	var zero M
	return topicEntry{zero.ProtoReflect().Descriptor().FullName(), func(m any) []string { return m.(M).GetTopics() }}
}

// messageName is msg's protobuf name, or "" for what is not a message.
func messageName(msg any) protoreflect.FullName {
	if m, ok := msg.(proto.Message); ok {
		return m.ProtoReflect().Descriptor().FullName()
	}
	return ""
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
		if !p.MaySome(op) {
			return nil, forbidden(p.Denied(op, ""))
		}
		topicsIn, known := topicsOf[messageName(msg)]
		if !known {
			// Fail closed: a request whose topics the check cannot read
			// is allowed only to a token that may do op everywhere.
			if p.MayAll(op) {
				return ctx, nil
			}
			return nil, forbidden("this call's topics are not known to the scope check; it needs a token not limited to topics")
		}
		topics := topicsIn(msg)
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
