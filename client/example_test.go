package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/delayqtest"
)

// exampleServer starts an in-process delayq for the examples; in your code
// the address is that of your delayq server.
func exampleServer() (addr string, stop func()) {
	t := &exampleTB{}
	srv := delayqtest.NewServer(t)
	return srv.URL, t.cleanup
}

// Close an unpaid order 30 minutes after it was placed: the shop puts a
// job when the order is placed, revokes it when the order is paid, and a
// consumer closes whatever is still unpaid when the job fires.
func Example_orderClose() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()

	p := client.NewProducer(addr)
	// Order 42 placed: close it in 30 minutes unless it is paid.
	id, err := p.Delay(ctx, "orderclose", []byte(`{"order":42}`), 30*time.Minute, client.ID("orderclose-42"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("scheduled", id)
	// Order 43 placed and (for the example) due now.
	p.Delay(ctx, "orderclose", []byte(`{"order":43}`), 0, client.ID("orderclose-43"))

	// Order 42 paid: revoke its job.
	if err := p.Revoke(ctx, "orderclose-42"); err != nil && !errors.Is(err, delayq.ErrNotFound) {
		log.Fatal(err)
	}

	cctx, cancel := context.WithCancel(ctx)
	c := client.NewConsumer([]string{addr}, "orderclose", client.Concurrency(8))
	c.Consume(cctx, func(ctx context.Context, j *client.Job) error {
		var o struct{ Order int }
		if err := json.Unmarshal(j.Body, &o); err != nil {
			return client.Permanent(err) // retrying cannot fix a bad body
		}
		fmt.Println("closing unpaid order", o.Order)
		cancel() // the example stops after one job
		return nil
	})
	// Output:
	// scheduled orderclose-42
	// closing unpaid order 43
}

// Retry a failing call with exponential backoff: the handler returns an
// error and the consumer releases the job to run again later.
func Example_retry() {
	addr, stop := exampleServer()
	defer stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	p := client.NewProducer(addr)
	p.Delay(ctx, "webhook", []byte("https://example.com/hook"), 0, client.MaxAttempts(5))

	calls := 0
	c := client.NewConsumer([]string{addr}, "webhook",
		client.RetryBackoff(client.ExponentialBackoff(10*time.Millisecond, time.Second)))
	c.Consume(ctx, func(ctx context.Context, j *client.Job) error {
		calls++
		if calls < 3 {
			fmt.Printf("attempt %d failed\n", j.Attempts)
			return errors.New("503 from the webhook")
		}
		fmt.Printf("attempt %d delivered\n", j.Attempts)
		cancel()
		return nil
	})
	// Output:
	// attempt 1 failed
	// attempt 2 failed
	// attempt 3 delivered
}

// A test of your own code against a real in-process delayq.
func ExampleProducer_At() {
	addr, stop := exampleServer()
	defer stop()
	ctx := context.Background()
	p := client.NewProducer(addr)
	at := time.Now().Add(48 * time.Hour)
	id, _ := p.At(ctx, "ride-rating", []byte("ride-7"), at, client.ID("ride-rating-7"), client.TTR(10*time.Second))
	j, _ := p.Get(ctx, id)
	fmt.Println(j.ID, j.State, j.TTR)
	// Output: ride-rating-7 delayed 10s
}

// exampleTB lets examples use delayqtest, which wants a testing.TB.
type exampleTB struct {
	testing.TB
	cleanups []func()
	dirs     []string
}

func (t *exampleTB) Helper()                   {}
func (t *exampleTB) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleTB) Fatalf(f string, a ...any) { log.Fatalf(f, a...) }
func (t *exampleTB) Errorf(f string, a ...any) { log.Printf(f, a...) }
func (t *exampleTB) TempDir() string {
	d, err := os.MkdirTemp("", "delayq-example-")
	if err != nil {
		log.Fatal(err)
	}
	t.dirs = append(t.dirs, d)
	return d
}

func (t *exampleTB) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
	for _, d := range t.dirs {
		os.RemoveAll(d)
	}
}
