// Command orderclose closes orders that are still unpaid 30 minutes after
// they were placed, the canonical delay-queue job.
//
// Start a delayq server (`delayq serve`), then:
//
//	go run ./examples/orderclose -place 42   # order 42 placed: schedule its close
//	go run ./examples/orderclose -pay 42     # order 42 paid: revoke the close
//	go run ./examples/orderclose             # run the consumer that closes orders
//
// -after shortens the 30 minutes for a demonstration (-after 5s).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/client"
)

const topic = "orderclose"

// order is the job body.
type order struct {
	ID int `json:"id"`
}

func main() {
	addrs := flag.String("addr", "127.0.0.1:7480", "delayq server addresses, comma-separated")
	place := flag.Int("place", 0, "schedule the close of this order")
	pay := flag.Int("pay", 0, "revoke the close of this order")
	after := flag.Duration("after", 30*time.Minute, "how long an order may stay unpaid")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	var err error
	switch {
	case *place != 0:
		err = placeOrder(ctx, strings.Split(*addrs, ","), *place, *after)
	case *pay != 0:
		err = payOrder(ctx, strings.Split(*addrs, ","), *pay)
	default:
		err = closeOrders(ctx, strings.Split(*addrs, ","), log)
	}
	if err != nil {
		log.Error("orderclose", "err", err)
		os.Exit(1)
	}
}

// jobID names an order's close job, so paying can revoke it and placing
// the same order twice is refused.
func jobID(orderID int) string { return fmt.Sprintf("orderclose-%d", orderID) }

func placeOrder(ctx context.Context, addrs []string, id int, after time.Duration) error {
	body, _ := json.Marshal(order{ID: id})
	_, err := client.NewProducer(addrs...).Delay(ctx, topic, body, after, client.ID(jobID(id)))
	if errors.Is(err, delayq.ErrExists) {
		fmt.Println("order", id, "already scheduled")
		return nil
	}
	if err == nil {
		fmt.Println("order", id, "closes at", time.Now().Add(after).Format(time.TimeOnly), "unless paid")
	}
	return err
}

func payOrder(ctx context.Context, addrs []string, id int) error {
	err := client.NewProducer(addrs...).Revoke(ctx, jobID(id))
	if errors.Is(err, delayq.ErrNotFound) {
		fmt.Println("order", id, "has no pending close (already closed?)")
		return nil
	}
	if err == nil {
		fmt.Println("order", id, "paid; close revoked")
	}
	return err
}

func closeOrders(ctx context.Context, addrs []string, log *slog.Logger) error {
	c := client.NewConsumer(addrs, topic, client.Concurrency(8), client.Logger(log))
	log.Info("closing unpaid orders; Ctrl-C to stop")
	return c.Consume(ctx, func(ctx context.Context, j *client.Job) error {
		var o order
		if err := json.Unmarshal(j.Body, &o); err != nil {
			return client.Permanent(fmt.Errorf("bad body %q: %w", j.Body, err))
		}
		// Here: mark the order closed in your database and return its
		// stock, idempotently (delivery is at least once).
		log.Info("closed unpaid order", "order", o.ID, "attempt", j.Attempts)
		return nil
	})
}
