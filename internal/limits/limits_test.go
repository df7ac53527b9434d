package limits

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

func TestConnListener(t *testing.T) {
	t.Parallel()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := ConnListener(raw, ConnOptions{Max: 1, Refuse: func(c net.Conn, _ string) { io.WriteString(c, "full\n") }})
	defer l.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c
		}
	}()
	first, _ := net.Dial("tcp", raw.Addr().String())
	defer first.Close()
	server := <-accepted
	second, _ := net.Dial("tcp", raw.Addr().String())
	defer second.Close()
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, _ := io.ReadAll(second); string(b) != "full\n" {
		t.Fatalf("over the cap: %q", b)
	}
	// Closing (twice) frees exactly one slot.
	server.Close()
	server.Close()
	if l.Open() != 0 {
		t.Fatalf("Open = %d after close", l.Open())
	}
	third, _ := net.Dial("tcp", raw.Addr().String())
	defer third.Close()
	if c := <-accepted; c == nil {
		t.Fatal("a slot freed by a close was not given to the next connection")
	} else {
		c.Close()
	}
}

func TestBytes(t *testing.T) {
	t.Parallel()
	b := NewBytes(100, 20*time.Millisecond)
	rel1, err := b.Acquire(t.Context(), 60)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Acquire(t.Context(), 60); !errors.Is(err, delayq.ErrLimit) {
		t.Fatalf("over the bound: %v", err)
	} else if code, status := api.CodeOf(err); code != api.CodeTooManyBytes || status != 503 {
		t.Fatalf("over the bound answers %d %s", status, code)
	}
	// A request larger than the whole bound runs alone, not never.
	rel1()
	rel1() // idempotent
	relBig, err := b.Acquire(t.Context(), 1000)
	if err != nil {
		t.Fatal(err)
	}
	if b.InFlight() != 1000 {
		t.Fatalf("InFlight = %d, want the lone request's 1000", b.InFlight())
	}
	relBig()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := NewBytes(1, time.Second).Acquire(ctx, 1); err != nil {
		t.Fatalf("a free budget with a done context: %v", err)
	}
	var none *Bytes
	if rel, err := none.Acquire(t.Context(), 1<<40); err != nil {
		t.Fatal(err)
	} else {
		rel()
	}
}

func TestRates(t *testing.T) {
	t.Parallel()
	r := NewRates(0.001, 2)
	for i := range 2 {
		if _, err := r.Allow("a"); err != nil {
			t.Fatalf("request %d within the burst: %v", i, err)
		}
	}
	wait, err := r.Allow("a")
	if code, status := api.CodeOf(err); code != api.CodeRateLimited || status != 429 || wait <= 0 {
		t.Fatalf("over the rate: %v %d %v", code, status, wait)
	}
	if _, err := r.Allow("b"); err != nil {
		t.Fatalf("another key shares no bucket: %v", err)
	}
	if NewRates(0, 1) != nil {
		t.Fatal("rate 0 must bound nothing")
	}
}

// On the client's side a limit's answer wraps delayq.ErrLimit.
func TestLimitAnswersWrapErrLimit(t *testing.T) {
	t.Parallel()
	for _, code := range []string{api.CodeRateLimited, api.CodeTooManyBytes, api.CodeTopicLimit} {
		err := api.ErrorResponse{Error: api.ErrorBody{Code: code, Message: "m"}}.Err(503)
		if !errors.Is(err, delayq.ErrLimit) || errors.Is(err, delayq.ErrInvalid) {
			t.Errorf("%s: %v does not wrap ErrLimit alone", code, err)
		}
	}
}
