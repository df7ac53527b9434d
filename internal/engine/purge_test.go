package engine

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// TestPurgePages: a purge of more jobs than one store write takes goes
// page by page and deletes them all, and no more than there were.
func TestPurgePages(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		hour := time.Hour
		for b := range 3 {
			reqs := make([]PutRequest, 0, 900)
			for i := range 900 {
				reqs = append(reqs, PutRequest{ID: fmt.Sprintf("j%d-%d", b, i), Topic: "t", TTR: ptr(time.Minute), Delay: &hour})
			}
			if _, err := h.e.Put(context.Background(), reqs); err != nil {
				t.Fatal(err)
			}
		}
		h.put(PutRequest{ID: "ready"})
		n, err := h.e.Purge(context.Background(), "t", "delayed")
		if err != nil || n != 2700 {
			t.Fatalf("Purge = %d, %v; want 2700", n, err)
		}
		ts, _ := h.e.Topic(context.Background(), "t")
		if ts.Delayed != 0 || ts.Ready != 1 {
			t.Fatalf("after the purge %+v, want the ready job only", ts)
		}
	})
}
