package grpcapi

import (
	"context"
	"strconv"

	"connectrpc.com/connect"

	"github.com/delayq/delayq"
	delayqv1 "github.com/delayq/delayq/api/gen/delayq/v1"
	"github.com/delayq/delayq/api/gen/delayq/v1/delayqv1connect"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/limits"
)

// service implements DelayQService over one engine. Each method only
// translates; the interceptor (handler.go) has checked the caller's scope
// and turns the errors returned here into statuses.
type service struct {
	e *engine.Engine
}

var _ delayqv1connect.DelayQServiceHandler = (*service)(nil)

// chargePut charges what a put of a body of n bytes and an id will cost
// in memory to the call's share of the bytes in flight (limits.PutCost),
// as the HTTP API charges its puts.
func chargePut(ctx context.Context, bodyLen, idLen int) error {
	return limits.ChargeFrom(ctx).Take(ctx, limits.PutCost(bodyLen, idLen))
}

func (s *service) Put(ctx context.Context, req *connect.Request[delayqv1.PutRequest]) (*connect.Response[delayqv1.PutResponse], error) {
	m := req.Msg
	if err := chargePut(ctx, len(m.GetBody()), len(m.GetId())); err != nil {
		return nil, err
	}
	p, err := toPut(m.GetTopic(), putOf(m), "")
	if err != nil {
		return nil, err
	}
	jobs, err := s.e.Put(ctx, []engine.PutRequest{p})
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.PutResponse{Id: jobs[0].ID, Seq: jobs[0].Seq}), nil
}

func (s *service) PutBatch(ctx context.Context, req *connect.Request[delayqv1.PutBatchRequest]) (*connect.Response[delayqv1.PutBatchResponse], error) {
	m := req.Msg
	if len(m.GetJobs()) > delayq.MaxBatch {
		// Refused before anything is charged or converted; the engine
		// says the same of a batch that gets to it.
		return nil, delayq.Invalid(delayq.CodeBatchTooBig, "jobs", "%d jobs in one batch, at most %d", len(m.GetJobs()), delayq.MaxBatch)
	}
	puts := make([]engine.PutRequest, len(m.GetJobs()))
	for i, j := range m.GetJobs() {
		if err := chargePut(ctx, len(j.GetBody()), len(j.GetId())); err != nil {
			return nil, err
		}
		var err error
		if puts[i], err = toPut(m.GetTopic(), putJobOf(j), "jobs["+strconv.Itoa(i)+"]."); err != nil {
			return nil, err
		}
	}
	jobs, err := s.e.Put(ctx, puts) // the engine names the element an error is about
	if err != nil {
		return nil, err
	}
	resp := &delayqv1.PutBatchResponse{Jobs: make([]*delayqv1.PutResponse, len(jobs))}
	for i, j := range jobs {
		resp.Jobs[i] = &delayqv1.PutResponse{Id: j.ID, Seq: j.Seq}
	}
	return connect.NewResponse(resp), nil
}

func (s *service) Reserve(ctx context.Context, req *connect.Request[delayqv1.ReserveRequest]) (*connect.Response[delayqv1.ReserveResponse], error) {
	m := req.Msg
	er := engine.ReserveRequest{Topics: m.GetTopics(), N: int(m.GetN()), By: reserver(ctx, req.Peer().Addr)}
	wait, err := duration(m.GetWait(), delayq.CodeBadWait, "wait")
	if err != nil {
		return nil, err
	}
	if wait != nil {
		er.Wait = *wait
	}
	// The wait ends with the call's context, so a client that cancels
	// (or whose deadline passes, or whose connection drops) stops
	// waiting; the engine gives back any job it reserved meanwhile, at no
	// cost of an attempt.
	jobs, err := s.e.Reserve(ctx, er)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil && len(jobs) > 0 {
		// Gone between the reserve and its answer: nobody will read it.
		refs := make([]delayq.Ref, len(jobs))
		for i, j := range jobs {
			refs[i] = delayq.Ref{ID: j.ID, Seq: j.Seq, Reservation: j.Reservation}
		}
		s.e.GiveBack(refs...)
		return nil, ctx.Err()
	}
	return connect.NewResponse(&delayqv1.ReserveResponse{Jobs: fromJobs(jobs)}), nil
}

// refOf names the job of a call by id. An empty id is refused as bad_id
// here: a Ref with neither id nor seq names nothing, and over HTTP the id
// is a path segment that cannot be empty.
func refOf(id, reservation string) (delayq.Ref, error) {
	if id == "" {
		return delayq.Ref{}, delayq.CheckID(id)
	}
	return delayq.Ref{ID: id, Reservation: reservation}, nil
}

// reserver names who reserves, for the jobs' attempts: the caller's
// principal, or its connection ("grpc 127.0.0.1:5000") when the server
// has no tokens, as the HTTP API names its callers.
func reserver(ctx context.Context, addr string) string {
	if p := principalOf(ctx); p != nil && p != auth.Open {
		return p.Name
	}
	return "grpc " + addr
}

// answer returns what answers the job a call returned, its reservation
// hidden from a caller that may not consume from its topic:
// answer(ctx)(s.e.Get(ctx, ref)).
func answer(ctx context.Context) func(*delayq.Job, error) (*delayqv1.Job, error) {
	return func(j *delayq.Job, err error) (*delayqv1.Job, error) {
		if err != nil {
			return nil, err
		}
		hideReservations(principalOf(ctx), j)
		return fromJob(j), nil
	}
}

func (s *service) Finish(ctx context.Context, req *connect.Request[delayqv1.FinishRequest]) (*connect.Response[delayqv1.FinishResponse], error) {
	ref, err := refOf(req.Msg.GetId(), req.Msg.GetReservation())
	if err != nil {
		return nil, err
	}
	j, err := answer(ctx)(s.e.Finish(ctx, ref))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.FinishResponse{Job: j}), nil
}

func (s *service) FinishBatch(ctx context.Context, req *connect.Request[delayqv1.FinishBatchRequest]) (*connect.Response[delayqv1.FinishBatchResponse], error) {
	in := req.Msg.GetJobs()
	refs := make([]delayq.Ref, len(in))
	for i, f := range in {
		refs[i] = delayq.Ref{ID: f.GetId(), Reservation: f.GetReservation()}
	}
	errs, err := s.e.FinishBatch(ctx, refs)
	if err != nil {
		return nil, err
	}
	resp := &delayqv1.FinishBatchResponse{Results: make([]*delayqv1.FinishResult, len(errs))}
	for i, err := range errs {
		resp.Results[i] = &delayqv1.FinishResult{Id: in[i].GetId(), Ok: err == nil}
		if err != nil {
			resp.Results[i].Error = errorInfo(err)
		}
	}
	return connect.NewResponse(resp), nil
}

func (s *service) Release(ctx context.Context, req *connect.Request[delayqv1.ReleaseRequest]) (*connect.Response[delayqv1.ReleaseResponse], error) {
	m := req.Msg
	ref, err := refOf(req.Msg.GetId(), m.GetReservation())
	if err != nil {
		return nil, err
	}
	r := engine.ReleaseRequest{Ref: ref, Reason: m.GetReason()}
	r.Priority = m.Priority
	d, err := duration(m.GetDelay(), delayq.CodeBadDelay, "delay")
	if err != nil {
		return nil, err
	}
	if d != nil {
		r.Delay = *d
	}
	j, err := answer(ctx)(s.e.Release(ctx, r))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.ReleaseResponse{Job: j}), nil
}

func (s *service) Touch(ctx context.Context, req *connect.Request[delayqv1.TouchRequest]) (*connect.Response[delayqv1.TouchResponse], error) {
	ref, err := refOf(req.Msg.GetId(), req.Msg.GetReservation())
	if err != nil {
		return nil, err
	}
	j, err := answer(ctx)(s.e.Touch(ctx, ref))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.TouchResponse{Job: j}), nil
}

func (s *service) Bury(ctx context.Context, req *connect.Request[delayqv1.BuryRequest]) (*connect.Response[delayqv1.BuryResponse], error) {
	m := req.Msg
	ref, err := refOf(req.Msg.GetId(), m.GetReservation())
	if err != nil {
		return nil, err
	}
	r := engine.BuryRequest{Ref: ref, Reason: m.GetReason()}
	r.Priority = m.Priority
	j, err := answer(ctx)(s.e.Bury(ctx, r))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.BuryResponse{Job: j}), nil
}

func (s *service) Kick(ctx context.Context, req *connect.Request[delayqv1.KickRequest]) (*connect.Response[delayqv1.KickResponse], error) {
	ref, err := refOf(req.Msg.GetId(), "")
	if err != nil {
		return nil, err
	}
	j, err := answer(ctx)(s.e.KickJob(ctx, ref))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.KickResponse{Job: j}), nil
}

func (s *service) KickTopic(ctx context.Context, req *connect.Request[delayqv1.KickTopicRequest]) (*connect.Response[delayqv1.KickTopicResponse], error) {
	n := req.Msg.GetN()
	if n < 0 || n > engine.MaxKick {
		// Checked here as well as by the engine: an int64 need not fit
		// the engine's int on every platform.
		return nil, delayq.Invalid(delayq.CodeBadN, "n", "%d is not between 0 and %d", n, uint64(engine.MaxKick))
	}
	state := delayq.State(req.Msg.GetState())
	if state == "" {
		state = delayq.StateBuried // retry failed jobs only, never fire future ones unasked
	}
	k, err := s.e.Kick(ctx, req.Msg.GetTopic(), int(n), state)
	if err != nil {
		return nil, err
	}
	noteAudit(ctx, "kicked", k.Kicked)
	return connect.NewResponse(&delayqv1.KickTopicResponse{Kicked: int64(k.Kicked), State: string(k.State)}), nil
}

func (s *service) Get(ctx context.Context, req *connect.Request[delayqv1.GetRequest]) (*connect.Response[delayqv1.GetResponse], error) {
	ref, err := refOf(req.Msg.GetId(), "")
	if err != nil {
		return nil, err
	}
	j, err := answer(ctx)(s.e.Get(ctx, ref))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.GetResponse{Job: j}), nil
}

func (s *service) Update(ctx context.Context, req *connect.Request[delayqv1.UpdateRequest]) (*connect.Response[delayqv1.UpdateResponse], error) {
	m := req.Msg
	ref, err := refOf(req.Msg.GetId(), "")
	if err != nil {
		return nil, err
	}
	u := engine.UpdateRequest{Ref: ref}
	if m.Body != nil { // set, even empty: replaces the body (nil keeps it)
		u.Body = m.Body
		if err := chargePut(ctx, len(u.Body), 0); err != nil {
			return nil, err
		}
	}
	u.Priority = m.Priority
	if u.Delay, err = duration(m.GetDelay(), delayq.CodeBadDelay, "delay"); err != nil {
		return nil, err
	}
	if u.At, err = timestamp(m.GetAt(), delayq.CodeBadAt, "at"); err != nil {
		return nil, err
	}
	j, err := answer(ctx)(s.e.Update(ctx, u))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.UpdateResponse{Job: j}), nil
}

func (s *service) Delete(ctx context.Context, req *connect.Request[delayqv1.DeleteRequest]) (*connect.Response[delayqv1.DeleteResponse], error) {
	ref, err := refOf(req.Msg.GetId(), "")
	if err != nil {
		return nil, err
	}
	j, err := answer(ctx)(s.e.Delete(ctx, ref, true))
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&delayqv1.DeleteResponse{Job: j}), nil
}

func (s *service) List(ctx context.Context, req *connect.Request[delayqv1.ListRequest]) (*connect.Response[delayqv1.ListResponse], error) {
	m := req.Msg
	res, err := listPage(ctx, s.e, engine.ListRequest{Topic: m.GetTopic(), State: delayq.State(m.GetState()), Cursor: m.GetCursor(), Limit: int(m.GetLimit())})
	if err != nil {
		return nil, err
	}
	hideReservations(principalOf(ctx), res.Jobs...)
	return connect.NewResponse(&delayqv1.ListResponse{Jobs: fromJobs(res.Jobs), Next: res.Next}), nil
}

// listPageBodies bounds the job bodies of one List answer: a page of
// 1,000 large jobs would be one message of up to 64 MiB and more, held
// whole in memory until the client took it (issue 28: one such call with
// its flow-control window at 0 pinned 137 MiB), and larger than gRPC
// clients take by default (4 MiB). A page stops before it would pass the
// bound, with next set, as a page that reached its limit does.
const listPageBodies = 3 << 20

// listChunk bounds how many jobs listPage reads at once.
const listChunk = 32

// listPage reads the page r asks for a chunk at a time, each charged to
// the call's share of the bytes in flight (it stays charged until the
// answer is written), and stops early when the next chunk could take the
// page's bodies past listPageBodies: it reads only as many jobs as fit
// even at the largest body.
func listPage(ctx context.Context, e *engine.Engine, r engine.ListRequest) (*engine.ListResult, error) {
	if r.Limit < 0 || r.Limit > engine.MaxListLimit {
		return e.List(ctx, r) // refuses it, in the engine's words
	}
	left := r.Limit
	if left == 0 {
		left = engine.DefaultListLimit
	}
	maxBody := max(1, e.Config().MaxBody)
	page := &engine.ListResult{}
	bodies := 0
	for {
		n := min(left, listChunk, max(1, (listPageBodies-bodies)/maxBody))
		if len(page.Jobs) > 0 && bodies+maxBody > listPageBodies {
			n = 0 // not even one more job of the largest body fits
		}
		if n == 0 {
			return page, nil // page.Next is the cursor after the last job read
		}
		res, err := e.List(ctx, engine.ListRequest{Topic: r.Topic, State: r.State, Cursor: r.Cursor, Limit: n})
		if err != nil {
			return nil, err
		}
		cost := int64(0)
		for _, j := range res.Jobs {
			bodies += len(j.Body)
			cost += 3*int64(len(j.Body)) + 1<<10 // as read, in the message, marshalled
		}
		if err := limits.ChargeFrom(ctx).Take(ctx, cost); err != nil {
			return nil, err
		}
		page.Jobs = append(page.Jobs, res.Jobs...)
		page.Next = res.Next
		left -= len(res.Jobs)
		r.Cursor = res.Next
		if res.Next == "" || left <= 0 {
			return page, nil
		}
	}
}
