package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// PutRequest is one job to put. Zero fields take the server's defaults.
type PutRequest struct {
	// ID names the job; "" lets the server choose. With an ID a put is
	// retried safely after a network error (see Client.Put).
	ID   string
	Body []byte
	// Delay is how long from now the job waits; At, when not zero, is the
	// absolute due time and wins over Delay.
	Delay time.Duration
	At    time.Time
	// TTR is how long a consumer may hold the job. Default: the topic
	// policy's ttr, else 60 s; at least 1 s.
	TTR time.Duration
	// Priority orders ready jobs of a topic, lower first. Nil means 1024.
	Priority *uint32
	// MaxAttempts is how many reserves are allowed before the job is buried.
	// Default: the topic policy's max_attempts, else 0 (unlimited).
	MaxAttempts int
}

// wire converts r for the API.
func (r *PutRequest) wire() api.PutRequest {
	w := api.PutRequest{ID: r.ID, Priority: r.Priority}
	w.Body, w.BodyBase64 = api.EncodeBody(r.Body)
	if !r.At.IsZero() {
		w.At = &api.Time{Time: r.At}
	} else if r.Delay > 0 {
		w.Delay = ptr(api.Duration(r.Delay))
	}
	if r.TTR > 0 {
		w.TTR = ptr(api.Duration(r.TTR))
	}
	if r.MaxAttempts > 0 {
		w.MaxAttempts = ptr(r.MaxAttempts)
	}
	return w
}

// Put puts one job into topic (POST /v1/topics/{topic}/jobs).
//
// A put with an ID is retried after a network error, on another address if
// there is one; when the retry answers "already exists" for a job with the
// same topic and body, the first attempt was applied and Put reports it as
// a success, whether that job still waits or already ended (finished,
// deleted or failed within the server's --retain, the idempotency window:
// a job kept without its body, --retain-bodies=false, is matched by its
// topic). A put without an ID is sent again only when it certainly never
// reached a server, so it can never create two jobs; Producer always sets an
// ID. A put refused outright as a duplicate fails with delayq.ErrExists;
// ExistingState says what became of the job that has the id.
func (c *Client) Put(ctx context.Context, topic string, r PutRequest) (api.PutResponse, error) {
	var out api.PutResponse
	mode := retryUnsent
	if r.ID != "" {
		mode = retrySafe
	}
	res, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/jobs", in: r.wire(), out: &out, mode: mode})
	if err != nil && res.ambiguous && r.ID != "" && errors.Is(err, delayq.ErrExists) {
		return c.ownPut(ctx, topic, r, err)
	}
	return out, err
}

// ownPut decides whether the job that made a retried put answer "already
// exists", live or retained, is the one the first, unanswered attempt
// created.
func (c *Client) ownPut(ctx context.Context, topic string, r PutRequest, existsErr error) (api.PutResponse, error) {
	j, err := c.Get(ctx, r.ID)
	switch {
	case errors.Is(err, delayq.ErrNotFound):
		// Created, then consumed, finished and gone: still ours.
		return api.PutResponse{ID: r.ID}, nil
	case err != nil:
		// Cannot tell; the put was sent with our id and a job has it.
		return api.PutResponse{ID: r.ID}, nil
	case j.Topic != topic:
		return api.PutResponse{}, existsErr
	case j.State.Retained() && len(j.Body) == 0:
		// Ended and kept without its body (--retain-bodies=false): the
		// topic is all there is to compare.
	case string(j.Body) != string(r.Body):
		return api.PutResponse{}, existsErr
	}
	return api.PutResponse{ID: j.ID, Seq: j.Seq}, nil
}

// ExistingState returns, for a put refused because its id is taken
// (errors.Is(err, delayq.ErrExists)), the state of the job that has the
// id: live (delayed, ready, reserved, buried), or ended and retained
// within the server's --retain (finished, deleted, failed). It is "" for
// any other error, or when the server did not say.
func ExistingState(err error) delayq.State {
	var re *api.RemoteError
	if errors.Is(err, delayq.ErrExists) && errors.As(err, &re) {
		return delayq.State(re.State)
	}
	var ee *delayq.ExistsError // a put made in a transaction (package pgtx)
	if errors.As(err, &ee) {
		return ee.State
	}
	return ""
}

// PutBatch puts up to delayq.MaxBatch jobs into topic in one durable write
// (POST /v1/topics/{topic}/jobs/batch): all of them or none. Answers are in
// request order. When every job has an ID the batch is retried like Put;
// if a retry finds them existing, their Seq is looked up (0 when the job
// is already gone).
func (c *Client) PutBatch(ctx context.Context, topic string, rs []PutRequest) ([]api.PutResponse, error) {
	in := api.BatchRequest{Jobs: make([]api.PutRequest, len(rs))}
	allIDs := true
	for i := range rs {
		in.Jobs[i] = rs[i].wire()
		allIDs = allIDs && rs[i].ID != ""
	}
	mode := retryUnsent
	if allIDs {
		mode = retrySafe
	}
	var out api.BatchResponse
	res, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/jobs/batch", in: in, out: &out, mode: mode})
	if err != nil && res.ambiguous && allIDs && errors.Is(err, delayq.ErrExists) {
		return c.ownBatch(ctx, topic, rs, err)
	}
	return out.Jobs, err
}

// ownBatch is ownPut for a batch, which was applied whole or not at all.
func (c *Client) ownBatch(ctx context.Context, topic string, rs []PutRequest, existsErr error) ([]api.PutResponse, error) {
	out := make([]api.PutResponse, len(rs))
	for i, r := range rs {
		p, err := c.ownPut(ctx, topic, r, existsErr)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}

// Reserve long-polls for up to n jobs from any of topics (POST /v1/reserve),
// waiting at most wait for the first one; it answers an empty slice when
// wait runs out. Each job carries its Reservation and Deadline. A reserve is
// retried only when it never reached a server: a lost answer would leave its
// jobs reserved until their TTR runs out.
func (c *Client) Reserve(ctx context.Context, topics []string, n int, wait time.Duration) ([]*delayq.Job, error) {
	in := api.ReserveRequest{Topics: topics, N: n}
	if wait > 0 {
		in.Wait = ptr(api.Duration(wait))
	}
	var out api.JobsResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/reserve", in: in, out: &out, mode: retryUnsent, timeout: wait + c.timeout})
	if err != nil {
		return nil, err
	}
	return api.ToJobs(out.Jobs)
}

// Finish deletes a job the caller has reserved, presenting its reservation
// (POST /v1/jobs/{id}/finish). It fails with delayq.ErrNotReserved when the
// reservation is stale. Finishing is idempotent: a finish sent again with
// the same reservation succeeds while the server retains the finished job
// (--retain, default 1h); on a server that retains nothing, a finish
// retried after a network error that then finds the job gone reports
// success too: the first attempt did it.
func (c *Client) Finish(ctx context.Context, id, reservation string) error {
	res, err := c.do(ctx, call{method: http.MethodPost, path: jobPath(id) + "/finish",
		in: api.ActionRequest{Reservation: reservation}, mode: retrySafe})
	if err != nil && res.ambiguous && errors.Is(err, delayq.ErrNotFound) {
		return nil
	}
	return err
}

// FinishRef names one reserved job for FinishBatch.
type FinishRef struct {
	ID          string
	Reservation string
}

// FinishBatch finishes up to delayq.MaxBatch reserved jobs in one call
// (POST /v1/jobs/finish), one durable write on the server. errs[i] is nil
// when refs[i] was finished, or the error that entry alone met (it wraps
// delayq.ErrNotReserved for a stale reservation, delayq.ErrNotFound for a
// job that is gone); err is for the whole call, in which case nothing is
// known to be finished. As with Finish, an entry that a retried call
// finds gone after a network error counts as finished.
func (c *Client) FinishBatch(ctx context.Context, refs []FinishRef) (errs []error, err error) {
	in := api.FinishBatchRequest{Jobs: make([]api.FinishRef, len(refs))}
	for i, r := range refs {
		in.Jobs[i] = api.FinishRef{ID: r.ID, Reservation: r.Reservation}
	}
	var out api.FinishBatchResponse
	res, err := c.do(ctx, call{method: http.MethodPost, path: "/v1/jobs/finish", in: in, out: &out, mode: retrySafe})
	if err != nil {
		return nil, err
	}
	if len(out.Results) != len(refs) {
		return nil, fmt.Errorf("client: POST /v1/jobs/finish: %d results for %d jobs", len(out.Results), len(refs))
	}
	errs = make([]error, len(refs))
	for i, r := range out.Results {
		if r.OK || r.Error == nil {
			continue
		}
		errs[i] = r.Error.Err(0)
		if res.ambiguous && errors.Is(errs[i], delayq.ErrNotFound) {
			errs[i] = nil
		}
	}
	return errs, nil
}

// Release hands a reserved job back (POST /v1/jobs/{id}/release): ready at
// once, or delayed by delay. A nil priority keeps the job's priority.
func (c *Client) Release(ctx context.Context, id, reservation string, delay time.Duration, priority *uint32, opts ...ActionOption) (*delayq.Job, error) {
	in := api.ReleaseRequest{Reservation: reservation, Priority: priority, Reason: actionOptionsOf(opts).reason}
	if delay > 0 {
		in.Delay = ptr(api.Duration(delay))
	}
	return c.jobCall(ctx, call{method: http.MethodPost, path: jobPath(id) + "/release", in: in, mode: retryUnsent})
}

// Touch restarts a reserved job's TTR (POST /v1/jobs/{id}/touch). The job
// returned carries the new Deadline when the server sends it back.
func (c *Client) Touch(ctx context.Context, id, reservation string) (*delayq.Job, error) {
	return c.jobCall(ctx, call{method: http.MethodPost, path: jobPath(id) + "/touch",
		in: api.ActionRequest{Reservation: reservation}, mode: retrySafe})
}

// Bury moves a reserved job to buried (POST /v1/jobs/{id}/bury), where it
// stays until kicked. A nil priority keeps the job's priority.
func (c *Client) Bury(ctx context.Context, id, reservation string, priority *uint32, opts ...ActionOption) (*delayq.Job, error) {
	return c.jobCall(ctx, call{method: http.MethodPost, path: jobPath(id) + "/bury",
		in: api.ActionRequest{Reservation: reservation, Priority: priority, Reason: actionOptionsOf(opts).reason}, mode: retryUnsent})
}

// ActionOption adds an optional field to a Release or Bury.
type ActionOption func(*actionOptions)

type actionOptions struct{ reason string }

func actionOptionsOf(opts []ActionOption) actionOptions {
	var o actionOptions
	for _, f := range opts {
		f(&o)
	}
	return o
}

// WithReason says why the job failed; the server keeps it as the job's
// LastReason, shown by GET, list, the CLI and the dashboard. The server
// refuses a reason of more than delayq.MaxReasonLen bytes or with control
// characters (delayq.TruncateReason makes any text fit).
func WithReason(reason string) ActionOption {
	return func(o *actionOptions) { o.reason = reason }
}

// KickJob makes a buried or delayed job ready (POST /v1/jobs/{id}/kick).
func (c *Client) KickJob(ctx context.Context, id string) (*delayq.Job, error) {
	return c.jobCall(ctx, call{method: http.MethodPost, path: jobPath(id) + "/kick", mode: retryUnsent})
}

// Kick retries up to n buried jobs of topic: it makes them ready (POST
// /v1/topics/{topic}/kick). It returns how many; it never fires a delayed
// job (KickDelayed does). A server older than the kick's state field
// kicks delayed jobs when none is buried.
func (c *Client) Kick(ctx context.Context, topic string, n int) (int, error) {
	r, err := c.KickReport(ctx, topic, n)
	return r.Kicked, err
}

// KickReport is Kick answering also which kind of jobs moved: State is
// "buried" ("delayed" or "" from a server older than the state field).
func (c *Client) KickReport(ctx context.Context, topic string, n int) (api.KickResponse, error) {
	return c.kick(ctx, topic, api.KickRequest{N: n})
}

// KickDelayed fires up to n delayed jobs of topic early (earliest due
// first): they become ready now. It returns how many
// (POST /v1/topics/{topic}/kick {"state":"delayed"}).
func (c *Client) KickDelayed(ctx context.Context, topic string, n int) (int, error) {
	r, err := c.kick(ctx, topic, api.KickRequest{N: n, State: string(delayq.StateDelayed)})
	return r.Kicked, err
}

func (c *Client) kick(ctx context.Context, topic string, req api.KickRequest) (api.KickResponse, error) {
	var out api.KickResponse
	_, err := c.do(ctx, call{method: http.MethodPost, path: topicPath(topic) + "/kick",
		in: req, out: &out, mode: retryUnsent})
	return out, err
}

// Get returns a job in any state (GET /v1/jobs/{id}).
func (c *Client) Get(ctx context.Context, id string) (*delayq.Job, error) {
	return c.jobCall(ctx, call{method: http.MethodGet, path: jobPath(id), mode: retrySafe})
}

// UpdateRequest changes a job that is not reserved. Nil fields are kept;
// At wins over Delay.
type UpdateRequest struct {
	Delay    *time.Duration
	At       *time.Time
	Body     []byte // nil keeps the body
	Priority *uint32
}

// Update changes a job's due time, body or priority (PATCH /v1/jobs/{id}).
// It fails with delayq.ErrNotReserved while the job is reserved. Sending the
// same change twice has the same effect, except that a Delay counts from the
// later arrival.
func (c *Client) Update(ctx context.Context, id string, r UpdateRequest) (*delayq.Job, error) {
	in := api.UpdateRequest{Priority: r.Priority}
	if r.At != nil {
		in.At = &api.Time{Time: *r.At}
	} else if r.Delay != nil {
		in.Delay = ptr(api.Duration(*r.Delay))
	}
	if r.Body != nil {
		in.Body, in.BodyBase64 = api.EncodeBody(r.Body)
	}
	return c.jobCall(ctx, call{method: http.MethodPatch, path: jobPath(id), in: in, mode: retrySafe})
}

// Delete deletes a job in any state, with no reservation needed
// (DELETE /v1/jobs/{id}); this is how a producer revokes a job. A delete
// retried after a network error that then finds the job gone reports
// success.
func (c *Client) Delete(ctx context.Context, id string) error {
	res, err := c.do(ctx, call{method: http.MethodDelete, path: jobPath(id), mode: retrySafe})
	if err != nil && res.ambiguous && errors.Is(err, delayq.ErrNotFound) {
		return nil
	}
	return err
}

// Topics returns every topic's counts (GET /v1/topics).
func (c *Client) Topics(ctx context.Context) ([]api.Topic, error) {
	var out api.TopicsResponse
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/topics", out: &out, mode: retrySafe})
	return out.Topics, err
}

// Topic returns one topic's counts (GET /v1/topics/{topic}).
func (c *Client) Topic(ctx context.Context, topic string) (api.Topic, error) {
	var out api.Topic
	_, err := c.do(ctx, call{method: http.MethodGet, path: topicPath(topic), out: &out, mode: retrySafe})
	return out, err
}

// ListRequest selects a page of a topic's jobs.
type ListRequest struct {
	State  delayq.State // "" for every state
	Cursor string       // "" for the first page; then the Next of the last page
	Limit  int          // 0 for the server's default
}

// List returns a page of topic's jobs and the cursor of the next page, ""
// when there is none (GET /v1/topics/{topic}/jobs).
func (c *Client) List(ctx context.Context, topic string, r ListRequest) (jobs []*delayq.Job, next string, err error) {
	q := url.Values{}
	if r.State != "" {
		q.Set("state", string(r.State))
	}
	if r.Cursor != "" {
		q.Set("cursor", r.Cursor)
	}
	if r.Limit > 0 {
		q.Set("limit", strconv.Itoa(r.Limit))
	}
	path := topicPath(topic) + "/jobs"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var out api.JobsResponse
	if _, err := c.do(ctx, call{method: http.MethodGet, path: path, out: &out, mode: retrySafe}); err != nil {
		return nil, "", err
	}
	jobs, err = api.ToJobs(out.Jobs)
	return jobs, out.Next, err
}

// Cluster returns the live instances (GET /v1/cluster).
func (c *Client) Cluster(ctx context.Context) ([]api.Instance, error) {
	var out api.ClusterResponse
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/v1/cluster", out: &out, mode: retrySafe})
	return out.Instances, err
}

// Health returns nil when a server answers GET /healthz with success.
func (c *Client) Health(ctx context.Context) error {
	_, err := c.do(ctx, call{method: http.MethodGet, path: "/healthz", mode: retrySafe})
	return err
}

// jobCall runs a call whose answer, if any, is one job.
func (c *Client) jobCall(ctx context.Context, cl call) (*delayq.Job, error) {
	var out api.Job
	cl.out = &out
	if _, err := c.do(ctx, cl); err != nil {
		return nil, err
	}
	if out.ID == "" && out.Seq == 0 {
		return nil, nil // the server sent no job back
	}
	return out.ToJob()
}

// topicPath is /v1/topics/{topic}, the name percent-encoded ('/' included).
func topicPath(topic string) string { return "/v1/topics/" + url.PathEscape(topic) }

// jobPath is /v1/jobs/{id}.
func jobPath(id string) string { return "/v1/jobs/" + url.PathEscape(id) }
