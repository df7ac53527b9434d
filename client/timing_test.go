package client

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/google/go-cmp/cmp"
)

func TestExponentialBackoff(t *testing.T) {
	t.Parallel()
	b := ExponentialBackoff(time.Second, 30*time.Second)
	tests := []struct {
		attempt int
		nominal time.Duration
	}{{0, time.Second}, {1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {5, 16 * time.Second}, {6, 30 * time.Second}, {100, 30 * time.Second}}
	for _, tt := range tests {
		for range 200 {
			if d := b(tt.attempt); d < tt.nominal/2 || d > tt.nominal {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tt.attempt, d, tt.nominal/2, tt.nominal)
			}
		}
	}
	seen := map[time.Duration]bool{}
	for range 50 {
		seen[b(4)] = true
	}
	if len(seen) < 10 {
		t.Errorf("backoff(4) took %d distinct values in 50 draws, want jitter", len(seen))
	}
}

func TestMargin(t *testing.T) {
	t.Parallel()
	tests := []struct{ ttr, configured, want time.Duration }{
		{time.Second, 0, 100 * time.Millisecond},
		{60 * time.Second, 0, 5 * time.Second},
		{20 * time.Second, 0, 2 * time.Second},
		{time.Second, 800 * time.Millisecond, 500 * time.Millisecond},
		{10 * time.Second, 300 * time.Millisecond, 300 * time.Millisecond},
	}
	for _, tt := range tests {
		if got := margin(tt.ttr, tt.configured); got != tt.want {
			t.Errorf("margin(%v, %v) = %v, want %v", tt.ttr, tt.configured, got, tt.want)
		}
	}
}

// TestKeeperCancelsAtSoftDeadline checks, on synctest's fake clock, that a
// handler's context ends exactly a margin before the TTR, and that a touch
// moves that moment.
func TestKeeperCancelsAtSoftDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := &Consumer{cfg: consumerConfig{log: slog.New(slog.DiscardHandler)}}
		start := time.Now()
		j := newJob(nil, &delayq.Job{ID: "k", TTR: time.Second}, start, 100*time.Millisecond)
		ctx, cancel := context.WithCancelCause(t.Context())
		defer cancel(nil)
		hctx := jobCtx{ctx, j}
		if d, ok := hctx.Deadline(); !ok || d.Sub(start) != 900*time.Millisecond {
			t.Errorf("ctx.Deadline() = %v, %v; want start+900ms", d.Sub(start), ok)
		}
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() { cs.keep(ctx, j, cancel, done) })

		time.Sleep(500 * time.Millisecond)
		j.touched(time.Now()) // as a successful j.Touch would: deadline now start+1.5s
		<-ctx.Done()
		if got := time.Since(start); got != 1400*time.Millisecond {
			t.Errorf("context ended at +%v, want +1.4s (touched at +0.5s, TTR 1s, margin 100ms)", got)
		}
		if !errors.Is(context.Cause(ctx), ErrTTR) {
			t.Errorf("cause = %v, want ErrTTR", context.Cause(ctx))
		}
		close(done)
		wg.Wait()
	})
}

// failingTransport refuses every connection, like a server that is down,
// and records which addresses were tried when.
type failingTransport struct {
	mu    sync.Mutex
	start time.Time
	tries []string
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.tries = append(f.tries, r.URL.Host+"@"+time.Since(f.start).String())
	f.mu.Unlock()
	return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
}

func TestClientRetriesAcrossAddressesThenBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &failingTransport{start: time.Now()}
		c := New([]string{"a:1", "b:1"}, HTTPClient(&http.Client{Transport: ft}), CallAttempts(4),
			RetryWait(100*time.Millisecond), Discovery(0))
		_, err := c.Get(t.Context(), "x")
		if !errors.Is(err, delayq.ErrUnavailable) {
			t.Errorf("Get = %v, want ErrUnavailable", err)
		}
		// a and b at once; then, after a pause, each again (which one first
		// depends on the round-robin, the pause on jitter in [50ms, 100ms]).
		if len(ft.tries) != 4 || ft.tries[0] != "a:1@0s" || ft.tries[1] != "b:1@0s" {
			t.Fatalf("tries = %v, want a and b at 0s, then both again later", ft.tries)
		}
		if ft.tries[2][4:] != ft.tries[3][4:] || ft.tries[2][4:] == "0s" {
			t.Errorf("tries = %v, want the second round together after a pause", ft.tries)
		}
	})
}

func TestConsumerBacksOffWhileServersAreDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ft := &failingTransport{start: time.Now()}
		cs := NewConsumer([]string{"a:1"}, "t", HTTPClient(&http.Client{Transport: ft}), CallAttempts(1), Discovery(0))
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		if err := cs.Consume(ctx, func(context.Context, *Job) error { return nil }); err != nil {
			t.Errorf("Consume = %v, want nil when stopped", err)
		}
		// 100ms doubling to 5s: about 12 reserves in 30 s, not thousands.
		if n := len(ft.tries); n < 5 || n > 20 {
			t.Errorf("%d reserves in 30s with the server down, want about 12 (backoff, no busy loop): %v", n, ft.tries)
		}
	})
}

func TestAddrSetSkipsDownAddresses(t *testing.T) {
	t.Parallel()
	s := newAddrSet([]string{"a", "b", "c"})
	now := time.Now()
	s.markDown("b", now)
	var got []string
	for range 4 {
		got = append(got, s.pick(now, nil))
	}
	if diff := cmp.Diff([]string{"a", "c", "a", "c"}, got); diff != "" {
		t.Errorf("picks with b down (-want +got):\n%s", diff)
	}
	if p := s.pick(now.Add(time.Second), map[string]bool{"a": true, "c": true}); p != "b" {
		t.Errorf("pick after b's down period = %q, want b", p)
	}
	s.setMembers([]string{"d"})
	if diff := cmp.Diff([]string{"a", "b", "c", "d"}, s.bases()); diff != "" {
		t.Errorf("after learning d (-want +got):\n%s", diff)
	}
}
