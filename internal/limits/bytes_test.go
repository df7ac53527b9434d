package limits

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// long is a wait no test reaches: an answer that comes is not a timeout.
const long = time.Hour

// A body is charged as it is read, not by what it declares.
func TestChargeBodyAsBytesArrive(t *testing.T) {
	t.Parallel()
	b := NewBytes(1<<20, long)
	pr, pw := io.Pipe()
	c := b.Open()
	body := c.Body(t.Context(), pr)
	go func() {
		pw.Write([]byte("abc"))
		pw.Write(make([]byte, 200<<10))
		pw.Close()
	}()
	buf := make([]byte, 3)
	if _, err := io.ReadFull(body, buf); err != nil {
		t.Fatal(err)
	}
	if b.InFlight() != 3 || c.Held() != 3 {
		t.Fatalf("after 3 bytes: InFlight %d, held %d", b.InFlight(), c.Held())
	}
	// A reader asking for more than readChunk gets at most that per read.
	big := make([]byte, 1<<20)
	n, err := body.Read(big)
	if err != nil || n > readChunk {
		t.Fatalf("one read: %d, %v (chunk %d)", n, err, readChunk)
	}
	rest, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Held(); got != int64(3+n+len(rest)) || got != 3+200<<10 {
		t.Fatalf("held %d after the whole body", got)
	}
	c.Close()
	c.Close()
	if b.InFlight() != 0 || b.Peak() != 3+200<<10 {
		t.Fatalf("after close: InFlight %d, peak %d", b.InFlight(), b.Peak())
	}
}

// Two requests that each hold part of the budget and both wait for more
// would wait forever: the younger is refused at once (not after the
// wait), and its bytes let the older one finish.
func TestChargeStandoffRefusesTheYoungest(t *testing.T) {
	t.Parallel()
	b := NewBytes(100, long)
	older, younger := b.Open(), b.Open()
	if err := older.Take(t.Context(), 60); err != nil {
		t.Fatal(err)
	}
	if err := younger.Take(t.Context(), 40); err != nil {
		t.Fatal(err)
	}
	olderDone := make(chan error, 1)
	go func() { olderDone <- older.Take(t.Context(), 30) }()
	// The older waits (the younger is still going, it may finish); once
	// the younger asks for more too, nobody can: the younger goes.
	waitQueued(b, 1)
	err := younger.Take(t.Context(), 30)
	if code, status := api.CodeOf(err); !errors.Is(err, delayq.ErrLimit) || code != api.CodeTooManyBytes || status != 503 {
		t.Fatalf("the younger in a standoff: %v", err)
	}
	if younger.Held() != 40 {
		t.Fatalf("a refused take changed what the younger holds: %d", younger.Held())
	}
	younger.Close()
	if err := <-olderDone; err != nil {
		t.Fatalf("the older after the younger gave back: %v", err)
	}
	if older.Held() != 90 || b.InFlight() != 90 || b.Refused() != 1 {
		t.Fatalf("older holds %d, in flight %d, refused %d", older.Held(), b.InFlight(), b.Refused())
	}
	older.Close()
}

// The only holder is never made to wait, even past the bound and behind
// a queued newcomer: nobody else could give it anything.
func TestChargeLoneHolderRunsPastTheBound(t *testing.T) {
	t.Parallel()
	b := NewBytes(100, long)
	lone := b.Open()
	if err := lone.Take(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	newcomer := b.Open()
	granted := make(chan error, 1)
	go func() { granted <- newcomer.Take(t.Context(), 10) }()
	waitQueued(b, 1)
	if err := lone.Take(t.Context(), 50); err != nil {
		t.Fatalf("the lone holder: %v", err)
	}
	if b.InFlight() != 150 {
		t.Fatalf("InFlight %d", b.InFlight())
	}
	lone.Close()
	if err := <-granted; err != nil || newcomer.Held() != 10 {
		t.Fatalf("the newcomer after the lone holder closed: %v, holds %d", err, newcomer.Held())
	}
	newcomer.Close()
}

// A take that waits out the wait is refused and holds nothing more; one
// whose context ends gets the context's error.
func TestChargeWaitAndContext(t *testing.T) {
	t.Parallel()
	b := NewBytes(100, 20*time.Millisecond)
	holder := b.Open()
	// holder is busy elsewhere (not waiting), so nothing is a standoff.
	if err := holder.Take(t.Context(), 100); err != nil {
		t.Fatal(err)
	}
	c := b.Open()
	if err := c.Take(t.Context(), 5); !errors.Is(err, delayq.ErrLimit) {
		t.Fatalf("after the wait: %v", err)
	}
	if c.Held() != 0 || b.InFlight() != 100 {
		t.Fatalf("a refused take is charged: %d / %d", c.Held(), b.InFlight())
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	slow := NewBytes(100, long)
	h2 := slow.Open()
	h2.Take(t.Context(), 100)
	if err := slow.Open().Take(ctx, 5); !errors.Is(err, context.Canceled) {
		t.Fatalf("with a done context: %v", err)
	}
	// No wait at all: refused at once.
	none := NewBytes(10, 0)
	h3 := none.Open()
	h3.Take(t.Context(), 10)
	if err := none.Open().Take(t.Context(), 1); !errors.Is(err, delayq.ErrLimit) {
		t.Fatalf("with no wait: %v", err)
	}
	// A refused body read keeps answering the refusal.
	rc := b.Open()
	body := rc.Body(t.Context(), io.NopCloser(strings.NewReader("xyz")))
	if _, err := io.ReadAll(body); !errors.Is(err, delayq.ErrLimit) {
		t.Fatalf("a body read over the bound: %v", err)
	}
	if _, err := body.Read(make([]byte, 1)); !errors.Is(err, delayq.ErrLimit) {
		t.Fatalf("the next read: %v", err)
	}
	holder.Close()
	if b.InFlight() != 0 {
		t.Fatalf("InFlight %d after every close", b.InFlight())
	}
}

// Nil budgets and charges charge nothing, and a context carries a charge.
func TestChargeNil(t *testing.T) {
	t.Parallel()
	var b *Bytes
	c := b.Open()
	if c != nil || c.Take(t.Context(), 1<<40) != nil || c.Held() != 0 || b.InFlight() != 0 || b.Peak() != 0 || b.Refused() != 0 {
		t.Fatal("a nil budget charged something")
	}
	c.Give(1)
	c.Close()
	r := io.NopCloser(strings.NewReader("x"))
	if c.Body(t.Context(), r) != r {
		t.Fatal("a nil charge wrapped the body")
	}
	if ChargeFrom(WithCharge(t.Context(), nil)) != nil {
		t.Fatal("no charge in, a charge out")
	}
	real := NewBytes(10, long).Open()
	if ChargeFrom(WithCharge(t.Context(), real)) != real {
		t.Fatal("the context lost its charge")
	}
	real.Take(t.Context(), 8)
	real.Give(5)
	real.Give(50) // more than held gives what is held
	if real.Held() != 0 {
		t.Fatalf("held %d", real.Held())
	}
}

// A take that would carry its request past the whole budget waits to be
// alone, and meanwhile smaller takes pass it instead of queueing behind
// it: one large batch does not stall every other writer.
func TestChargeOversizedHoldsUpNobody(t *testing.T) {
	t.Parallel()
	b := NewBytes(100, long)
	small := b.Open()
	if err := small.Take(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	big := b.Open()
	bigDone := make(chan error, 1)
	go func() { bigDone <- big.Take(t.Context(), 150) }()
	waitQueued(b, 1)
	other := b.Open()
	if err := other.Take(t.Context(), 20); err != nil {
		t.Fatalf("a small take behind an oversized one: %v", err)
	}
	if err := small.Take(t.Context(), 5); err != nil {
		t.Fatalf("a holder's next take: %v", err)
	}
	small.Close()
	other.Close()
	if err := <-bigDone; err != nil || big.Held() != 150 {
		t.Fatalf("the oversized take once alone: %v, holds %d", err, big.Held())
	}
	big.Close()
	if b.InFlight() != 0 {
		t.Fatalf("InFlight %d", b.InFlight())
	}
}

// Behind an oversized take, a large take (over passLimit) waits its turn
// instead of reading more of its body, while small ones still pass.
func TestChargeBulkWaitsBehindOversized(t *testing.T) {
	t.Parallel()
	const max = 4 * passLimit
	b := NewBytes(max, long)
	holder := b.Open()
	if err := holder.Take(t.Context(), passLimit); err != nil {
		t.Fatal(err)
	}
	big := b.Open()
	bigDone := make(chan error, 1)
	go func() { bigDone <- big.Take(t.Context(), max+1) }()
	waitQueued(b, 1)
	bulk := b.Open()
	bulkDone := make(chan error, 1)
	go func() { bulkDone <- bulk.Take(t.Context(), 2*passLimit) }()
	waitQueued(b, 2)
	small := b.Open()
	if err := small.Take(t.Context(), passLimit/2); err != nil {
		t.Fatalf("a small take behind a parked bulk one: %v", err)
	}
	select {
	case err := <-bulkDone:
		t.Fatalf("a bulk take passed an oversized one: %v", err)
	default:
	}
	// Everyone but the oversized take gives back: it runs alone, then the
	// bulk take.
	holder.Close()
	small.Close()
	if err := <-bigDone; err != nil {
		t.Fatalf("the oversized take: %v", err)
	}
	select {
	case err := <-bulkDone:
		t.Fatalf("a bulk take ran beside the oversized one: %v", err)
	default:
	}
	big.Close()
	if err := <-bulkDone; err != nil || bulk.Held() != 2*passLimit {
		t.Fatalf("the bulk take after: %v, holds %d", err, bulk.Held())
	}
	bulk.Close()
	if b.InFlight() != 0 {
		t.Fatalf("InFlight %d", b.InFlight())
	}
}

// waitQueued waits until n takes are queued on b: the observable state
// the tests wait on before they act.
func waitQueued(b *Bytes, n int) {
	for {
		b.mu.Lock()
		q := len(b.queue)
		b.mu.Unlock()
		if q == n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}
