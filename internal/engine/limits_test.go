package engine

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// The topic bound counts topics the store still has: once a topic empties,
// a new one fits again (after the next look at the store).
func TestTopicBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{MaxTopics: 2})
		a := h.put(PutRequest{Topic: "a", Body: []byte("x")})
		h.put(PutRequest{Topic: "b", Body: []byte("x")})
		h.put(PutRequest{Topic: "a", Body: []byte("y")}) // a known topic always fits
		_, err := h.e.Put(context.Background(), []PutRequest{{Topic: "c", Body: []byte("x"), TTR: ptr(time.Minute)}})
		var le *delayq.LimitError
		if !errors.As(err, &le) || le.Code != api.CodeTopicLimit {
			t.Fatalf("a third topic: %v", err)
		}
		// Empty topic a.
		if _, err := h.e.Delete(context.Background(), delayq.Ref{ID: a.ID}, true); err != nil {
			t.Fatal(err)
		}
		jobs := h.reserve(0, "a")
		if _, err := h.e.Finish(context.Background(), delayq.Ref{ID: jobs[0].ID, Reservation: jobs[0].Reservation}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(refetchEvery) // fake time: the next full set asks the store again
		h.put(PutRequest{Topic: "c", Body: []byte("x")})
	})
}

func TestWaitingBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{MaxWaiting: 1})
		done := make(chan []*delayq.Job)
		go func() { done <- h.reserve(time.Minute, "t") }()
		synctest.Wait() // the first reserve waits
		_, err := h.e.Reserve(context.Background(), ReserveRequest{Topics: []string{"t"}, Wait: time.Minute})
		if code, status := api.CodeOf(err); code != api.CodeTooManyWaiting || status != 503 {
			t.Fatalf("a second waiting reserve: %v", err)
		}
		// Without a wait a reserve is not bounded; and a put wakes the first.
		if jobs := h.reserve(0, "t"); len(jobs) != 0 {
			t.Fatal(jobs)
		}
		h.put(PutRequest{Body: []byte("x")})
		if jobs := <-done; len(jobs) != 1 {
			t.Fatal(jobs)
		}
		// Its slot is free again.
		go func() { done <- h.reserve(time.Minute, "t") }()
		synctest.Wait()
		h.put(PutRequest{Body: []byte("y")})
		<-done
	})
}
