package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
)

// TestTopicStateForgotten creates and empties 5,000 topics, each given
// one job that is then finished (every 20th released once first), on a
// real server: once they have counted nothing for the hold, the metrics
// remember the live topics only (jobs, a policy, a waiting reserve),
// ByTopic (what the chart history and the alarms copy) holds those with
// counts, and /metrics names at most --metrics-max-topics topics in each
// family. Every topic ever seen used to stay until the process ended.
func TestTopicStateForgotten(t *testing.T) {
	const topics, batch, named = 5000, 1000, 50
	cfg := testConfig(t)
	cfg.MetricsMaxTopics = named
	cfg.AlarmInterval = time.Hour // a hold of 2h: the server's own sweeps forget nothing during the test
	s := startServer(t, cfg, &syncBuffer{})
	e, ctx := s.Engine(), t.Context()
	cycle := func(names []string, finish bool) {
		t.Helper()
		reqs := make([]engine.PutRequest, len(names))
		for i, n := range names {
			reqs[i] = engine.PutRequest{Topic: n}
		}
		if _, err := e.Put(ctx, reqs); err != nil {
			t.Fatal(err)
		}
		if !finish {
			return
		}
		js, err := e.Reserve(ctx, engine.ReserveRequest{Topics: names, N: len(names)})
		if err != nil || len(js) != len(names) {
			t.Fatalf("Reserve = %d jobs, %v; want %d", len(js), err, len(names))
		}
		refs := make([]delayq.Ref, len(js))
		for i, j := range js {
			refs[i] = delayq.Ref{ID: j.ID, Reservation: j.Reservation}
			if i%20 == 0 { // a failed attempt first, then finished
				if _, err := e.Release(ctx, engine.ReleaseRequest{Ref: refs[i]}); err != nil {
					t.Fatal(err)
				}
				again, err := e.Reserve(ctx, engine.ReserveRequest{Topics: []string{j.Topic}})
				if err != nil || len(again) != 1 {
					t.Fatalf("Reserve(%s) again = %v, %v", j.Topic, again, err)
				}
				refs[i].Reservation = again[0].Reservation
			}
		}
		if errs, err := e.FinishBatch(ctx, refs); err != nil {
			t.Fatal(err)
		} else {
			for _, err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	for lo := 0; lo < topics; lo += batch {
		names := make([]string, batch)
		for i := range names {
			names[i] = fmt.Sprintf("gone-%05d", lo+i)
		}
		cycle(names, true)
	}
	if _, err := e.SetPolicy(ctx, "configured", engine.Policy{MaxJobs: 10}); err != nil {
		t.Fatal(err)
	}
	cycle([]string{"configured", "waited-on"}, true)
	cycle([]string{"live-0", "live-1", "live-2"}, false)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go e.Reserve(wctx, engine.ReserveRequest{Topics: []string{"waited-on"}, Wait: time.Minute})
	for e.Waiting("waited-on") == 0 {
		time.Sleep(time.Millisecond)
	}
	checkTopicLabels(t, s, named)
	m := e.Metrics()
	if n := m.Topics(); n < topics {
		t.Fatalf("metrics remember %d topics after %d, want all", n, topics)
	}
	now := time.Now()
	if err := s.forgetTopics(ctx, now); err != nil {
		t.Fatal(err)
	}
	if n := m.Topics(); n < topics {
		t.Errorf("metrics remember %d topics within the hold, want all %d: readers have not seen their last counts", n, topics)
	}
	if err := s.forgetTopics(ctx, now.Add(s.forgetHold()+time.Second)); err != nil {
		t.Fatal(err)
	}
	if n := m.Topics(); n != 5 {
		t.Errorf("metrics remember %d topics after the hold, want the 5 live ones", n)
	}
	by := m.ByTopic()
	if len(by) != 2 || by["configured"].Finishes != 1 || by["waited-on"].Finishes != 1 {
		t.Errorf("ByTopic() = %v, want configured and waited-on with 1 finish each", by)
	}
	checkTopicLabels(t, s, named)
}

// checkTopicLabels fails t when a family of s's /metrics has more than
// named+1 topic label values.
func checkTopicLabels(t *testing.T, s *Server, named int) {
	t.Helper()
	for name, f := range families(t, s) {
		labels := map[string]bool{}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "topic" {
					labels[l.GetValue()] = true
				}
			}
		}
		if len(labels) > named+1 {
			t.Errorf("%s has %d topic label values, want at most %d", name, len(labels), named+1)
		}
	}
}
