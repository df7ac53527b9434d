// Command retry calls a flaky HTTP endpoint until it succeeds, backing off
// exponentially between attempts and giving up (burying the job) after a
// number of attempts. It demonstrates a consumer's failure handling:
// errors retry with backoff, client.RetryAfter honours a server's
// Retry-After, client.Permanent buries at once.
//
//	go run ./examples/retry -url https://example.com/hook -attempts 8
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/delayq/delayq/client"
)

const topic = "webhook"

func main() {
	addrs := flag.String("addr", "127.0.0.1:7480", "delayq server addresses, comma-separated")
	url := flag.String("url", "", "enqueue a call of this URL, then run the consumer")
	attempts := flag.Int("attempts", 8, "attempts before the job is buried")
	flag.Parse()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, strings.Split(*addrs, ","), *url, *attempts, log); err != nil {
		log.Error("retry", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, addrs []string, url string, attempts int, log *slog.Logger) error {
	if url != "" {
		p := client.NewProducer(addrs...)
		if _, err := p.Delay(ctx, topic, []byte(url), 0, client.MaxAttempts(attempts)); err != nil {
			return err
		}
	}
	c := client.NewConsumer(addrs, topic,
		client.Concurrency(4),
		client.RetryBackoff(client.ExponentialBackoff(time.Second, 5*time.Minute)),
		client.Logger(log),
		client.WithHooks(client.Hooks{
			Failure: func(j *client.Job, took time.Duration, err error, next string, delay time.Duration) {
				log.Warn("call failed", "url", string(j.Body), "attempt", j.Attempts, "next", next, "in", delay, "err", err)
			},
		}))
	return c.Consume(ctx, call)
}

// call POSTs to the job's URL. 2xx is done; 4xx other than 429 will not get
// better by retrying; 429 and 503 may say when to come back.
func call(ctx context.Context, j *client.Job) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, string(j.Body), nil)
	if err != nil {
		return client.Permanent(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err // network trouble: retry with backoff
	}
	resp.Body.Close()
	switch s := resp.StatusCode; {
	case s < 300:
		return nil
	case s == http.StatusTooManyRequests || s == http.StatusServiceUnavailable:
		err := fmt.Errorf("%s answered %s", j.Body, resp.Status)
		if secs, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil {
			return client.RetryAfter(err, time.Duration(secs)*time.Second)
		}
		return err
	case s >= 400 && s < 500:
		return client.Permanent(errors.New(resp.Status))
	default:
		return fmt.Errorf("%s answered %s", j.Body, resp.Status)
	}
}
