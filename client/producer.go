package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq"
	"github.com/google/uuid"
)

// Producer puts, changes and revokes jobs. Every put carries an id, chosen
// by the caller (ID) or generated here (a UUIDv7) before the first attempt,
// so a put retried after a network error never creates a second job. A
// Producer is safe for concurrent use.
type Producer struct {
	c *Client
}

// NewProducer returns a Producer for the servers at addrs ("127.0.0.1:7480"
// or "http://host:7480"), with default client settings. It panics on a bad
// address; use NewClient and Client.Producer for addresses from
// configuration or for other settings.
func NewProducer(addrs ...string) *Producer {
	return New(addrs).Producer()
}

// Producer returns a Producer that uses c.
func (c *Client) Producer() *Producer { return &Producer{c: c} }

// Client returns the low-level client the producer uses.
func (p *Producer) Client() *Client { return p.c }

// PutOption sets a field of a put.
type PutOption func(*PutRequest)

// ID names the job. Advice: the topic plus a business id
// ("orderclose-42"), so the job can be revoked or updated by that name and a
// duplicate put is refused with delayq.ErrExists.
func ID(id string) PutOption { return func(r *PutRequest) { r.ID = id } }

// TTR sets how long a consumer may hold the job before it is handed out
// again. Default 60 s; at least 1 s.
func TTR(d time.Duration) PutOption { return func(r *PutRequest) { r.TTR = d } }

// Priority orders ready jobs of a topic, lower first. Default 1024.
func Priority(p uint32) PutOption { return func(r *PutRequest) { r.Priority = &p } }

// MaxAttempts is how many times the job may be reserved before it is
// buried instead of being handed out again. Default 0: unlimited.
func MaxAttempts(n int) PutOption { return func(r *PutRequest) { r.MaxAttempts = n } }

// At puts a job into topic that becomes ready at t, and returns its id.
// A t in the past makes the job ready at once.
func (p *Producer) At(ctx context.Context, topic string, body []byte, t time.Time, opts ...PutOption) (string, error) {
	r := PutRequest{Body: body, At: t}
	if t.IsZero() {
		return "", fmt.Errorf("client: put into %q: zero time", topic)
	}
	return p.put(ctx, topic, r, opts)
}

// Delay puts a job into topic that becomes ready after d, and returns its id.
func (p *Producer) Delay(ctx context.Context, topic string, body []byte, d time.Duration, opts ...PutOption) (string, error) {
	return p.put(ctx, topic, PutRequest{Body: body, Delay: d}, opts)
}

func (p *Producer) put(ctx context.Context, topic string, r PutRequest, opts []PutOption) (string, error) {
	for _, o := range opts {
		o(&r)
	}
	if r.ID == "" {
		r.ID = newID()
	}
	res, err := p.c.Put(ctx, topic, r)
	if err != nil {
		return "", fmt.Errorf("client: put %q into %q: %w", r.ID, topic, err)
	}
	return res.ID, nil
}

// PutBatch puts up to delayq.MaxBatch jobs into topic in one durable write,
// all or none, and returns their ids in order. Jobs without an ID get one.
func (p *Producer) PutBatch(ctx context.Context, topic string, jobs []PutRequest) ([]string, error) {
	rs := make([]PutRequest, len(jobs))
	copy(rs, jobs)
	ids := make([]string, len(rs))
	for i := range rs {
		if rs[i].ID == "" {
			rs[i].ID = newID()
		}
		ids[i] = rs[i].ID
	}
	if _, err := p.c.PutBatch(ctx, topic, rs); err != nil {
		return nil, fmt.Errorf("client: put batch of %d into %q: %w", len(rs), topic, err)
	}
	return ids, nil
}

// Revoke deletes jobs by id, in whatever state they are (a closed order's
// reminder, say). It tries every id and returns the failures joined; a job
// that no longer exists (it already ran) fails with delayq.ErrNotFound,
// which callers often ignore.
func (p *Producer) Revoke(ctx context.Context, ids ...string) error {
	var errs []error
	for _, id := range ids {
		if err := p.c.Delete(ctx, id); err != nil {
			errs = append(errs, fmt.Errorf("client: revoke %q: %w", id, err))
		}
	}
	return errors.Join(errs...)
}

// Update changes a job that is not reserved: its due time, body or
// priority. It fails with delayq.ErrNotReserved while a consumer holds the
// job and delayq.ErrNotFound when it is gone.
func (p *Producer) Update(ctx context.Context, id string, r UpdateRequest) (*delayq.Job, error) {
	j, err := p.c.Update(ctx, id, r)
	if err != nil {
		return nil, fmt.Errorf("client: update %q: %w", id, err)
	}
	if j == nil {
		return p.Get(ctx, id)
	}
	return j, nil
}

// Get returns a job in any state; delayq.ErrNotFound when it is gone.
func (p *Producer) Get(ctx context.Context, id string) (*delayq.Job, error) {
	j, err := p.c.Get(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("client: get %q: %w", id, err)
	}
	return j, nil
}

// newID returns a UUIDv7: unique, and ordered by creation time, which keeps
// the server's id index append-mostly.
func newID() string {
	return uuid.Must(uuid.NewV7()).String()
}
