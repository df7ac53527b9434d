package client

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq/api"
)

// Defaults of the consumer's finish batching: a finish waits at most
// finishWindow for others to share its call, and a call carries at most
// finishMax jobs. A couple of milliseconds is small beside any TTR and
// lets a busy consumer finish a hundred jobs in one durable write.
const (
	finishWindow = 2 * time.Millisecond
	finishMax    = 100
)

// finishReq is one job a worker wants finished, and where it learns how
// that went.
type finishReq struct {
	ref  FinishRef
	done chan error
}

// finisher collects the finishes of a consumer's workers and sends them
// in batches (POST /v1/jobs/finish): a batch goes when max jobs are
// waiting, when window has passed since its first job, or when the
// consumer stops. Each worker waits for its own job's result, so hooks
// and logs still see per-job errors.
type finisher struct {
	c      *Client
	window time.Duration
	max    int
	in     chan finishReq
	done   chan struct{}
	// hurried is closed when the consumer stops reserving: from then on
	// every finish goes at once, so draining workers are not held back.
	hurried   chan struct{}
	hurryOnce sync.Once
}

// newFinisher starts a finisher; stop it with close.
func newFinisher(c *Client, window time.Duration, max int) *finisher {
	f := &finisher{c: c, window: window, max: max, in: make(chan finishReq), done: make(chan struct{}), hurried: make(chan struct{})}
	go f.loop()
	return f
}

// finish queues ref and waits for its result.
func (f *finisher) finish(ref FinishRef) error {
	r := finishReq{ref: ref, done: make(chan error, 1)}
	f.in <- r
	return <-r.done
}

// hurry makes the finisher send what it holds now and every later finish
// at once. It is safe to call more than once.
func (f *finisher) hurry() { f.hurryOnce.Do(func() { close(f.hurried) }) }

// close sends what is queued and stops the finisher. Call it once, after
// every worker has returned.
func (f *finisher) close() {
	close(f.in)
	<-f.done
}

func (f *finisher) loop() {
	defer close(f.done)
	for {
		first, ok := <-f.in
		if !ok {
			return
		}
		batch, open := f.collect(first)
		f.flush(batch)
		if !open {
			return
		}
	}
}

// collect gathers jobs after first until the batch is full, the window
// has passed or the input is closed (open false).
func (f *finisher) collect(first finishReq) (batch []finishReq, open bool) {
	batch = append(make([]finishReq, 0, f.max), first)
	t := time.NewTimer(f.window)
	defer t.Stop()
	for len(batch) < f.max {
		select {
		case r, ok := <-f.in:
			if !ok {
				return batch, false
			}
			batch = append(batch, r)
			continue
		default:
		}
		select {
		case r, ok := <-f.in:
			if !ok {
				return batch, false
			}
			batch = append(batch, r)
		case <-t.C:
			return batch, true
		case <-f.hurried:
			return batch, true
		}
	}
	return batch, true
}

// flush finishes a batch and hands each worker its result. A server
// without the batch endpoint (404 for the path, 405) gets one finish per
// job instead.
func (f *finisher) flush(batch []finishReq) {
	ctx, cancel := context.WithTimeout(context.Background(), f.c.timeout)
	defer cancel()
	refs := make([]FinishRef, len(batch))
	for i, r := range batch {
		refs[i] = r.ref
	}
	errs, err := f.c.FinishBatch(ctx, refs)
	if err != nil && noBatchEndpoint(err) {
		errs, err = make([]error, len(refs)), nil
		for i, r := range refs {
			errs[i] = f.c.Finish(ctx, r.ID, r.Reservation)
		}
	}
	for i, r := range batch {
		if err != nil {
			r.done <- err
		} else {
			r.done <- errs[i]
		}
	}
}

// noBatchEndpoint reports whether err says the server has no
// POST /v1/jobs/finish (an older delayq): 404 for the path itself, 405.
func noBatchEndpoint(err error) bool {
	var re *api.RemoteError
	if !errors.As(err, &re) {
		return false
	}
	return re.Status == http.StatusMethodNotAllowed || re.Status == http.StatusNotFound && strings.HasPrefix(re.Message, "no such endpoint")
}
