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
