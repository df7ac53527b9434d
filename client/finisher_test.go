package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// finishCounter is a transport that records the finish calls a client
// makes: the size of each batch finish, and how many single finishes.
type finishCounter struct {
	mu      sync.Mutex
	batches []int
	singles int
}

func (fc *finishCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPost && r.URL.Path == "/v1/jobs/finish" {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		var in api.FinishBatchRequest
		_ = json.Unmarshal(b, &in)
		fc.mu.Lock()
		fc.batches = append(fc.batches, len(in.Jobs))
		fc.mu.Unlock()
	} else if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/finish") {
		fc.mu.Lock()
		fc.singles++
		fc.mu.Unlock()
	}
	return http.DefaultTransport.RoundTrip(r)
}

func (fc *finishCounter) seen() ([]int, int) {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return append([]int(nil), fc.batches...), fc.singles
}

// batchingConsumer is a consumer of topic whose finishes are batched by
// count alone (the time window is an hour), so tests need no clock.
func batchingConsumer(t *testing.T, topic string, max, concurrency int, hooks Hooks) (*Consumer, *Client, *finishCounter) {
	t.Helper()
	srv, _ := newTestClient(t)
	fc := &finishCounter{}
	c := New([]string{srv.URL}, HTTPClient(&http.Client{Transport: fc}))
	t.Cleanup(c.Close)
	cs := NewConsumer(nil, topic, UseClient(c), Concurrency(concurrency), WithHooks(hooks))
	cs.cfg.finishWindow, cs.cfg.finishMax = time.Hour, max
	return cs, c, fc
}

// TestConsumerFinishesInBatches: finishes of workers that succeed go in
// one batch call once max of them are waiting, never one call per job.
func TestConsumerFinishesInBatches(t *testing.T) {
	t.Parallel()
	cs, c, fc := batchingConsumer(t, "t", 4, 4, Hooks{})
	putN(t, c.Producer(), "t", 8)
	stop := consume(t, cs, func(context.Context, *Job) error { return nil })
	waitFor(t, "every job finished", func() bool { return topicCounts(t, c, "t") == [4]int{} })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	batches, singles := fc.seen()
	if singles != 0 || len(batches) != 2 || batches[0] != 4 || batches[1] != 4 {
		t.Errorf("finish calls: batches %v, singles %d; want two batches of 4 and no single finish", batches, singles)
	}
}

// TestConsumerFlushesFinishesOnStop: finishes still waiting for company
// when the consumer stops are sent, not lost, and Consume returns.
func TestConsumerFlushesFinishesOnStop(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	finished := map[string]error{}
	hooks := Hooks{Finish: func(j *Job, _ time.Duration, err error) {
		mu.Lock()
		finished[j.ID] = err
		mu.Unlock()
	}}
	cs, c, fc := batchingConsumer(t, "t", 100, 3, hooks)
	putN(t, c.Producer(), "t", 3)
	ran := make(chan struct{}, 3)
	stop := consume(t, cs, func(context.Context, *Job) error {
		ran <- struct{}{}
		return nil
	})
	for range 3 {
		<-ran
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := topicCounts(t, c, "t"); got != [4]int{} {
		t.Errorf("after stop the topic holds %v, want every job finished", got)
	}
	batches, singles := fc.seen()
	total := 0
	for _, n := range batches {
		total += n
	}
	if singles != 0 || total != 3 {
		t.Errorf("finish calls: batches %v, singles %d; want 3 jobs in batches", batches, singles)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, err := range finished {
		if err != nil {
			t.Errorf("hook saw finish of %s fail: %v", id, err)
		}
	}
	if len(finished) != 3 {
		t.Errorf("finish hook ran for %v, want 3 jobs", finished)
	}
}

// TestConsumerBatchFinishErrorsPerJob: when one entry of a batch fails
// (its job was deleted meanwhile), only that job's hook sees an error.
func TestConsumerBatchFinishErrorsPerJob(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	finished := map[string]error{}
	hooks := Hooks{Finish: func(j *Job, _ time.Duration, err error) {
		mu.Lock()
		finished[j.ID] = err
		mu.Unlock()
	}}
	cs, c, _ := batchingConsumer(t, "t", 2, 2, hooks)
	putN(t, c.Producer(), "t", 2)
	stop := consume(t, cs, func(ctx context.Context, j *Job) error {
		if j.ID == "t-0" {
			return c.Delete(ctx, j.ID) // an operator revoked it meanwhile
		}
		return nil
	})
	waitFor(t, "both finishes reported", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(finished) == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if err := finished["t-0"]; !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("finish of the deleted job reported %v, want ErrNotFound", err)
	}
	if err := finished["t-1"]; err != nil {
		t.Errorf("finish of t-1 reported %v, want nil", err)
	}
}

// TestFinishBatchCall checks the client call itself: per-entry errors map
// to the sentinels.
func TestFinishBatchCall(t *testing.T) {
	t.Parallel()
	_, c := newTestClient(t)
	putN(t, c.Producer(), "t", 2)
	jobs, err := c.Reserve(t.Context(), []string{"t"}, 2, 0)
	if err != nil || len(jobs) != 2 {
		t.Fatalf("reserve = %v, %v", jobs, err)
	}
	errs, err := c.FinishBatch(t.Context(), []FinishRef{
		{ID: jobs[0].ID, Reservation: jobs[0].Reservation},
		{ID: jobs[1].ID, Reservation: "0-0"},
		{ID: "nosuch", Reservation: "1-1"},
	})
	if err != nil || len(errs) != 3 {
		t.Fatalf("FinishBatch = %v, %v", errs, err)
	}
	if errs[0] != nil || !errors.Is(errs[1], delayq.ErrNotReserved) || !errors.Is(errs[2], delayq.ErrNotFound) {
		t.Errorf("FinishBatch errors = %v, want nil, ErrNotReserved, ErrNotFound", errs)
	}
	if errs, err := c.FinishBatch(t.Context(), make([]FinishRef, delayq.MaxBatch+1)); !errors.Is(err, delayq.ErrInvalid) {
		t.Errorf("FinishBatch of %d = %v, %v; want ErrInvalid", delayq.MaxBatch+1, errs, err)
	}
}
