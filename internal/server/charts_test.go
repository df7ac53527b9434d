package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// TestChartsWiring: the server feeds the engine's fires to its history
// and serves the history and due counts over HTTP, from the real store.
func TestChartsWiring(t *testing.T) {
	s := New(testConfig(t), nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	put := func(body string) {
		t.Helper()
		resp, err := http.Post(s.URL()+"/v1/topics/orders/jobs", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("put %s = %d", body, resp.StatusCode)
		}
	}
	get := func(path string, v any) {
		t.Helper()
		resp, err := http.Get(s.URL() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
			t.Fatal(err)
		}
	}
	put(`{"id":"soon","body":"x","delay":"20ms"}`)
	put(`{"id":"later","body":"x","delay":"30m"}`)
	// Wait for the timer to fire "soon": the topic shows it ready.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	for {
		var tp api.Topic
		get("/v1/topics/orders", &tp)
		if tp.Ready == 1 {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the timer never fired the job: %+v", tp)
		case <-time.After(5 * time.Millisecond):
		}
	}
	if err := s.hist.Sample(t.Context()); err != nil { // the server's own sampler waits 10 s
		t.Fatal(err)
	}
	var h api.TopicHistory
	get("/v1/topics/orders/history", &h)
	if !h.Sampled || len(h.Samples) != 1 || h.Samples[0].Fires != 1 || h.Samples[0].Delayed != 1 || h.Samples[0].Lateness == nil {
		t.Errorf("history = %+v, want one sample with the fire and one delayed job", h)
	}
	var due api.DueCounts
	get("/v1/topics/orders/due", &due)
	if len(due.Buckets) != 3 || due.Buckets[0].Count != 0 || due.Buckets[1].Count != 1 || due.Buckets[2].Count != 1 {
		t.Errorf("due counts = %+v, want 0 within 1m, 1 within 1h and 24h", due.Buckets)
	}
}
