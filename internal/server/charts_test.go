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

// TestChartsOverRedis: two instances share Redis. Job counts and due
// counts are the same on both; each delayed job's fire is counted once,
// by the instance whose timer made it ready, into the series both share:
// both instances' histories show it, once.
func TestChartsOverRedis(t *testing.T) {
	url := redisURL(t)
	a, b := startOverRedis(t, url), startOverRedis(t, url)
	get := func(s *Server, path string, v any) {
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
	prefix := "charts-" + time.Now().Format("150405.000000") + "-"
	var topics []string
	for i := range 8 {
		topic := prefix + string(rune('a'+i))
		topics = append(topics, topic)
		for _, body := range []string{`{"body":"x","delay":"20ms"}`, `{"body":"x","delay":"30m"}`} {
			resp, err := http.Post(a.URL()+"/v1/topics/"+topic+"/jobs", "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				t.Fatalf("put into %s = %d", topic, resp.StatusCode)
			}
		}
	}
	// Sample both instances until every topic's fire is in some history;
	// a fire is told to the history just after Redis shows the job ready.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	firesOf := func(s *Server, topic string) int {
		var h api.TopicHistory
		get(s, "/v1/topics/"+topic+"/history", &h)
		n := 0
		for _, smp := range h.Samples {
			n += smp.Fires
		}
		return n
	}
	for {
		for _, s := range []*Server{a, b} {
			if err := s.hist.Sample(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		done := true
		for _, topic := range topics {
			fa, fb := firesOf(a, topic), firesOf(b, topic)
			if fa > 1 || fb > 1 {
				t.Fatalf("topic %s: %d fires on one instance, %d on the other; its one job fired once", topic, fa, fb)
			}
			done = done && fa == 1 && fb == 1
		}
		if done {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("the fires never all reached a history")
		case <-time.After(10 * time.Millisecond):
		}
	}
	// A finish on each instance lands in the same bucket: both read 2.
	fin := prefix + "fin"
	for _, s := range []*Server{a, b} {
		resp, err := http.Post(s.URL()+"/v1/topics/"+fin+"/jobs", "application/json", strings.NewReader(`{"body":"x"}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		resp, err = http.Post(s.URL()+"/v1/reserve", "application/json", strings.NewReader(`{"topics":["`+fin+`"]}`))
		if err != nil {
			t.Fatal(err)
		}
		var r api.JobsResponse
		if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || len(r.Jobs) != 1 {
			t.Fatalf("reserve from %s = %v, %v", fin, r, err)
		}
		resp.Body.Close()
		resp, err = http.Post(s.URL()+"/v1/jobs/"+r.Jobs[0].ID+"/finish", "application/json", strings.NewReader(`{"reservation":"`+r.Jobs[0].Reservation+`"}`))
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("finish = %v, %v", resp.StatusCode, err)
		}
		resp.Body.Close()
		if err := s.hist.Sample(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	for i, s := range []*Server{a, b} {
		var h api.TopicHistory
		get(s, "/v1/topics/"+fin+"/history", &h)
		n := 0
		for _, smp := range h.Samples {
			n += smp.Finishes
		}
		if n != 2 {
			t.Errorf("instance %d: %d finishes in %s's history, want 2 (one finished on each instance)", i, n, fin)
		}
	}
	for _, topic := range topics {
		var ha, hb api.TopicHistory
		get(a, "/v1/topics/"+topic+"/history", &ha)
		get(b, "/v1/topics/"+topic+"/history", &hb)
		la, lb := ha.Samples[len(ha.Samples)-1], hb.Samples[len(hb.Samples)-1]
		if la.Ready != 1 || la.Delayed != 1 || lb.Ready != 1 || lb.Delayed != 1 {
			t.Errorf("topic %s: last samples %+v and %+v, want 1 ready and 1 delayed on both instances", topic, la, lb)
		}
		var da, db api.DueCounts
		get(a, "/v1/topics/"+topic+"/due", &da)
		get(b, "/v1/topics/"+topic+"/due", &db)
		for i, want := range []int{0, 1, 1} {
			if da.Buckets[i].Count != want || db.Buckets[i].Count != want {
				t.Errorf("topic %s within %s: %d and %d due, want %d on both", topic, da.Buckets[i].Within, da.Buckets[i].Count, db.Buckets[i].Count, want)
			}
		}
	}
}
