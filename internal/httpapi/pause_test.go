package httpapi

import (
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq/api"
)

func TestPauseResumeTopic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMemAPI(t, Options{})
		a.put("orders", `{"id":"o1","body":"x"}`)
		var tp api.Topic
		a.must(http.StatusOK, "POST", "/v1/topics/orders/pause", `{"for":"10m"}`, &tp)
		if !tp.Paused || tp.Ready != 1 {
			t.Fatalf("pause answered %+v", tp)
		}
		if jobs := a.reserve("orders", 1); len(jobs) != 0 {
			t.Fatalf("reserved %v from a paused topic", jobs)
		}
		time.Sleep(10*time.Minute + time.Millisecond)
		if jobs := a.reserve("orders", 1); len(jobs) != 1 {
			t.Fatalf("after the pause ran out reserved %d jobs, want 1", len(jobs))
		}

		// Without "for" the pause lasts until resumed; resume wakes a
		// reserve that is waiting on the topic.
		a.must(http.StatusOK, "POST", "/v1/topics/orders/pause", "", &tp)
		a.put("orders", `{"id":"o2","body":"x"}`)
		time.Sleep(24 * time.Hour)
		got := make(chan int)
		go func() {
			var r api.JobsResponse
			a.must(http.StatusOK, "POST", "/v1/reserve", `{"topics":["orders"],"wait":"1m"}`, &r)
			got <- len(r.Jobs)
		}()
		synctest.Wait()
		a.must(http.StatusOK, "POST", "/v1/topics/orders/resume", "", &tp)
		if tp.Paused {
			t.Fatalf("resume answered %+v", tp)
		}
		if n := <-got; n != 1 {
			t.Fatalf("the waiting reserve got %d jobs after resume, want 1", n)
		}

		for _, tc := range []struct{ path, body, code string }{
			{"/v1/topics/orders/pause", `{"for":"-1s"}`, "bad_pause"},
			{"/v1/topics/orders/pause", `{"for":0}`, "bad_pause"},
			{"/v1/topics/orders/pause", `{"for":"soon"}`, "bad_json"},
			{"/v1/topics/-bad/pause", `{"for":"1m"}`, "bad_topic"},
			{"/v1/topics/-bad/resume", ``, "bad_topic"},
		} {
			status, body := a.do("POST", tc.path, tc.body)
			if status != http.StatusBadRequest || errorOf(t, body).Code != tc.code {
				t.Errorf("POST %s %s = %d %s, want 400 %s", tc.path, tc.body, status, body, tc.code)
			}
		}
		a.must(http.StatusOK, "GET", "/v1/topics/orders", "", &tp)
		if tp.Paused {
			t.Fatalf("a refused pause paused the topic: %+v", tp)
		}
	})
}

func TestPurgeTopicJobs(t *testing.T) {
	a := newMemAPI(t, Options{})
	for _, b := range []string{`{"id":"r1","body":"x"}`, `{"id":"r2","body":"x"}`, `{"id":"d1","body":"x","delay":"1h"}`, `{"id":"d2","body":"x","delay":"2h"}`} {
		a.put("orders", b)
	}
	a.put("other", `{"id":"o1","body":"x","delay":"1h"}`)
	for _, tc := range []struct{ path, code string }{
		{"/v1/topics/orders/jobs", "bad_state"},
		{"/v1/topics/orders/jobs?state=gone", "bad_state"},
		{"/v1/topics/-x/jobs?state=ready", "bad_topic"},
	} {
		status, body := a.do("DELETE", tc.path, "")
		if status != http.StatusBadRequest || errorOf(t, body).Code != tc.code {
			t.Errorf("DELETE %s = %d %s, want 400 %s", tc.path, status, body, tc.code)
		}
	}
	var p api.PurgeResponse
	a.must(http.StatusOK, "DELETE", "/v1/topics/orders/jobs?state=delayed", "", &p)
	if p.Deleted != 2 {
		t.Fatalf("purged %d delayed jobs, want 2", p.Deleted)
	}
	var tp api.Topic
	a.must(http.StatusOK, "GET", "/v1/topics/orders", "", &tp)
	if tp.Ready != 2 || tp.Delayed != 0 {
		t.Fatalf("after the purge: %+v, want 2 ready and no delayed", tp)
	}
	a.must(http.StatusOK, "GET", "/v1/topics/other", "", &tp)
	if tp.Delayed != 1 {
		t.Fatalf("a purge of orders touched other: %+v", tp)
	}
	a.must(http.StatusOK, "DELETE", "/v1/topics/nothing/jobs?state=buried", "", &p)
	if p.Deleted != 0 {
		t.Fatalf("purge of an unknown topic = %d", p.Deleted)
	}
}
