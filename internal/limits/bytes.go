package limits

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Bytes is the budget of request and answer bytes held in memory at once
// across all requests (--max-inflight-bytes). Each request opens a
// Charge, takes its share as its body arrives (Charge.Body), as its
// handler builds what the body decodes into and what a long answer holds
// (Charge.Take), and while its answer is being written (Answers), and
// gives it all back when it is answered (Charge.Close).
//
// Bytes are charged as they arrive, not by the declared Content-Length up
// front: charged up front, a client that declared a third of the budget
// and sent a byte a second held that third for the whole body timeout,
// and three such clients locked every other writer out (issue 18). Bytes
// not yet sent now cost nothing, so a trickling client holds what it has
// sent and no more.
//
// Taking a share piece by piece has one danger: requests that each hold
// part of the budget and all wait for more, so none finishes and none
// gives back. Bytes notices that state when it arises (every request that
// holds bytes is waiting for more) and refuses the youngest waiter that
// holds some (wound-wait): its bytes go back and the older requests go
// on. A request larger than the whole budget still runs, once it is the
// only one holding bytes; while it waits for that, small requests pass it
// and larger ones wait behind it.
type Bytes struct {
	max  int64
	wait time.Duration

	mu     sync.Mutex
	used   int64     // bytes taken now
	queue  []*waiter // takes waiting for bytes, first come first served
	active int       // charges holding bytes and not waiting: progress is possible
	seq    uint64    // charges opened, to tell the youngest

	inFlight atomic.Int64 // used, readable without the lock
	peak     atomic.Int64
	refused  atomic.Int64
}

// waiter is one Take waiting in the queue.
type waiter struct {
	c    *Charge
	n    int64
	done chan struct{} // closed once granted or refused
	err  error         // nil: granted; set before done closes
}

// NewBytes bounds request bytes in flight to max; a take waits at most
// wait for its bytes, then is refused. max <= 0 returns nil, which bounds
// nothing.
func NewBytes(max int64, wait time.Duration) *Bytes {
	if max <= 0 {
		return nil
	}
	return &Bytes{max: max, wait: wait}
}

// Charge is one request's account against the Bytes budget. It is used
// by the request's own goroutine only (reads of its body and its handler
// run in turn). All methods are safe on a nil Charge, which charges
// nothing.
type Charge struct {
	b       *Bytes
	id      uint64
	held    int64   // guarded by b.mu
	waiting *waiter // guarded by b.mu; non-nil while queued
	closed  bool    // guarded by b.mu
}

// Open starts a request's account. Safe on a nil Bytes (returns nil).
func (b *Bytes) Open() *Charge {
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seq++
	return &Charge{b: b, id: b.seq}
}

// Acquire takes n bytes on a fresh Charge and returns its Close: a request
// that knows its whole share up front.
func (b *Bytes) Acquire(ctx context.Context, n int64) (release func(), err error) {
	c := b.Open()
	if err := c.Take(ctx, n); err != nil {
		c.Close()
		return nil, err
	}
	return c.Close, nil
}

// Take charges n more bytes to c, waiting up to the budget's wait while
// the budget is spent. It returns a *delayq.LimitError (503
// too_many_bytes_in_flight) when the wait runs out or when c is chosen to
// break a standoff, and ctx's error when ctx ends first. After an error c
// holds what it held before; the caller answers the refusal and closes c.
func (c *Charge) Take(ctx context.Context, n int64) error {
	if c == nil || n <= 0 {
		return nil
	}
	b := c.b
	b.mu.Lock()
	if c.closed {
		b.mu.Unlock()
		return nil
	}
	// The only holder runs alone, whatever the queue: it waits for nobody
	// and, were it to wait, nobody could give it anything. Anyone else
	// goes first if it fits and no earlier take waits in line before it.
	if b.used == c.held || b.used+n <= b.max && !b.lineAhead(c.held+n) {
		b.grant(c, n)
		b.mu.Unlock()
		return nil
	}
	if b.wait <= 0 {
		b.mu.Unlock()
		return b.refusal()
	}
	w := &waiter{c: c, n: n, done: make(chan struct{})}
	b.queue = append(b.queue, w)
	c.waiting = w
	if c.held > 0 {
		b.active--
	}
	b.settle()
	b.mu.Unlock()

	t := time.NewTimer(b.wait)
	defer t.Stop()
	var err error
	select {
	case <-w.done:
		return w.err
	case <-t.C:
		err = b.refusal()
	case <-ctx.Done():
		err = ctx.Err()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-w.done: // granted or refused meanwhile: that answer stands
		return w.err
	default:
	}
	b.unqueue(w)
	b.settle()
	return err
}

// Hold charges n bytes to c at once, whatever the budget holds: bytes
// already in memory that cannot wait, such as an answer being written
// (Answers). They count as any others, so requests that come meanwhile
// wait for them, and they go back with Give or Close.
func (c *Charge) Hold(n int64) {
	if c == nil || n <= 0 {
		return
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed || c.waiting != nil {
		return
	}
	b.grant(c, n)
}

// Give returns n of c's bytes before c closes: a handler done with part of
// what it took.
func (c *Charge) Give(n int64) {
	if c == nil || n <= 0 {
		return
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	b.give(c, min(n, c.held))
	b.settle()
}

// Close gives back everything c holds. Idempotent.
func (c *Charge) Close() {
	if c == nil {
		return
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return
	}
	if c.waiting != nil { // not by its own goroutine's design; keep the books right anyway
		b.unqueue(c.waiting)
	}
	b.give(c, c.held)
	c.closed = true
	b.settle()
}

// Held is what c holds now.
func (c *Charge) Held() int64 {
	if c == nil {
		return 0
	}
	c.b.mu.Lock()
	defer c.b.mu.Unlock()
	return c.held
}

// grant charges n to c, which is not queued. b.mu is held.
func (b *Bytes) grant(c *Charge, n int64) {
	if c.held == 0 {
		b.active++
	}
	c.held += n
	b.used += n
	b.inFlight.Store(b.used)
	for p := b.peak.Load(); b.used > p && !b.peak.CompareAndSwap(p, b.used); p = b.peak.Load() {
	}
}

// give takes n back from c, which is not queued. b.mu is held.
func (b *Bytes) give(c *Charge, n int64) {
	if n <= 0 {
		return
	}
	c.held -= n
	b.used -= n
	b.inFlight.Store(b.used)
	if c.held == 0 {
		b.active--
	}
}

// unqueue removes w from the queue unanswered. b.mu is held.
func (b *Bytes) unqueue(w *waiter) {
	if i := slices.Index(b.queue, w); i >= 0 {
		b.queue = slices.Delete(b.queue, i, i+1)
	}
	w.c.waiting = nil
	if w.c.held > 0 {
		b.active++
	}
}

// settle grants the waiting takes in line for as long as they fit (first
// come first served, but an oversized take waits to be alone and lets
// small takes pass; see oversized), then breaks a standoff if one is left: bytes are held, every holder waits, and the
// head cannot be granted, so no byte will ever come back by itself. The
// youngest waiter that holds bytes is refused; giving them back (when its
// request answers) lets the rest go on. b.mu is held.
func (b *Bytes) settle() {
	bulkWaits := false // an oversized take is in line: only small ones pass it
	for i := 0; i < len(b.queue); {
		w := b.queue[i]
		if b.used != w.c.held { // the only holder is granted whatever it asks
			if bulkWaits && w.c.held+w.n > passLimit {
				i++ // parked behind the oversized take
				continue
			}
			if b.used+w.n > b.max {
				if oversized(w) {
					bulkWaits = true
					i++
					continue
				}
				break // first come first served
			}
		}
		b.queue = slices.Delete(b.queue, i, i+1)
		w.c.waiting = nil
		if w.c.held > 0 {
			b.active++ // it holds and no longer waits; grant counts only a first byte
		}
		b.grant(w.c, w.n)
		close(w.done)
	}
	if len(b.queue) == 0 || b.active > 0 {
		return
	}
	var victim *waiter
	for _, w := range b.queue {
		if w.c.held > 0 && (victim == nil || w.c.id > victim.c.id) {
			victim = w
		}
	}
	if victim == nil {
		return // nothing is held, so the head fits: unreachable
	}
	b.unqueue(victim)
	victim.err = b.refusal()
	close(victim.done)
}

// oversized reports whether w would take its request past the whole
// budget: it can run only alone. Small requests (up to passLimit) pass it
// in line: were they to wait behind it, one large batch would stall every
// other writer until all before it had finished. Larger ones wait behind
// it, so they do not read more bodies in the meantime (bytes the
// collector must then reclaim when they are refused).
func oversized(w *waiter) bool { return w.c.held+w.n > w.c.b.max }

// passLimit is the most a request may hold and still pass an oversized
// take in line: a single-job put (its body at the default --max-body,
// and the copies it decodes into) or a reserve or finish.
const passLimit = 1 << 20

// lineAhead reports whether a take waits in line that a newcomer, which
// would then hold total, must not pass: as settle goes through the line.
// b.mu is held.
func (b *Bytes) lineAhead(total int64) bool {
	bulkWaits := false
	for _, w := range b.queue {
		switch {
		case bulkWaits && w.c.held+w.n > passLimit: // parked behind an oversized take
		case oversized(w):
			bulkWaits = true
		default:
			return true // it did not fit: first come first served
		}
	}
	return bulkWaits && total > passLimit
}

// refusal is the answer to a take the budget cannot hold.
func (b *Bytes) refusal() error {
	b.refused.Add(1)
	return &delayq.LimitError{Code: api.CodeTooManyBytes, Retry: true,
		Reason: fmt.Sprintf("request bytes in flight are at their bound of %d bytes (--max-inflight-bytes); retry later", b.max)}
}

// InFlight is the bytes taken now.
func (b *Bytes) InFlight() int64 {
	if b == nil {
		return 0
	}
	return b.inFlight.Load()
}

// Peak is the most bytes ever in flight at once, for tests and metrics.
func (b *Bytes) Peak() int64 {
	if b == nil {
		return 0
	}
	return b.peak.Load()
}

// Refused counts the takes refused (answered 503).
func (b *Bytes) Refused() int64 {
	if b == nil {
		return 0
	}
	return b.refused.Load()
}

// Max is the bound.
func (b *Bytes) Max() int64 { return b.max }

// readChunk bounds one Read through Charge.Body, so what a read holds
// before it is charged stays small whatever buffer the reader passes.
const readChunk = 64 << 10

// Body wraps a request body so that each byte is charged to c as it
// arrives. Once a take is refused every later Read returns that refusal,
// and the bytes of the refused read are dropped: the request is being
// answered with the refusal. Safe on a nil Charge (returns body).
func (c *Charge) Body(ctx context.Context, body io.ReadCloser) io.ReadCloser {
	if c == nil {
		return body
	}
	return &chargedBody{c: c, ctx: ctx, r: body}
}

type chargedBody struct {
	c   *Charge
	ctx context.Context
	r   io.ReadCloser
	err error
}

func (cb *chargedBody) Read(p []byte) (int, error) {
	if cb.err != nil {
		return 0, cb.err
	}
	if len(p) > readChunk {
		p = p[:readChunk]
	}
	n, err := cb.r.Read(p)
	if n > 0 {
		if terr := cb.c.Take(cb.ctx, int64(n)); terr != nil {
			cb.err = terr
			return 0, terr
		}
	}
	return n, err
}

func (cb *chargedBody) Close() error { return cb.r.Close() }

// chargeKey is the context key of a request's Charge.
type chargeKey struct{}

// WithCharge returns ctx carrying c, for handlers that charge what they
// decode (ChargeFrom).
func WithCharge(ctx context.Context, c *Charge) context.Context {
	if c == nil {
		return ctx
	}
	return context.WithValue(ctx, chargeKey{}, c)
}

// ChargeFrom is the Charge ctx carries, or nil (which charges nothing).
func ChargeFrom(ctx context.Context) *Charge {
	c, _ := ctx.Value(chargeKey{}).(*Charge)
	return c
}
