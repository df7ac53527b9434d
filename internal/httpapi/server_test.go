package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store/diskstore"
	"github.com/delayq/delayq/internal/store/memstore"
)

func TestTopics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMemAPI(t, Options{})
		var empty api.TopicsResponse
		a.must(http.StatusOK, "GET", "/v1/topics", "", &empty)
		if empty.Topics == nil || len(empty.Topics) != 0 {
			t.Errorf("topics of an empty server = %+v, want []", empty)
		}
		a.put("b", `{"id":"r1","ttr":"1h"}`)
		a.put("a", `{"id":"d1","delay":"1h"}`)
		a.put("b", `{"id":"r2"}`)
		a.reserve("b", 1)
		time.Sleep(90 * time.Second)
		var got api.TopicsResponse
		a.must(http.StatusOK, "GET", "/v1/topics", "", &got)
		want := []api.Topic{{Name: "a", Delayed: 1}, {Name: "b", Ready: 1, Reserved: 1, OldestReadyAge: 90}}
		if diff := cmp.Diff(want, got.Topics); diff != "" {
			t.Errorf("topics (-want +got):\n%s", diff)
		}
		if err := a.e.Pause(t.Context(), "a", time.Minute); err != nil {
			t.Fatal(err)
		}
		var tp api.Topic
		a.must(http.StatusOK, "GET", "/v1/topics/a", "", &tp)
		if !tp.Paused {
			t.Errorf("paused topic = %+v, want paused", tp)
		}
		time.Sleep(2 * time.Minute)
		a.must(http.StatusOK, "GET", "/v1/topics/a", "", &tp)
		if tp.Paused {
			t.Errorf("topic after its pause = %+v, want not paused", tp)
		}
	})
}

func TestCluster(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want []api.Instance
	}{
		{"from the request host", Options{}, []api.Instance{{URL: "http://example.com"}}},
		{"advertised", Options{AdvertiseURL: "http://10.0.0.5:7480"}, []api.Instance{{URL: "http://10.0.0.5:7480"}}},
		{"cluster", Options{Cluster: func(context.Context) ([]delayq.Instance, error) {
			return []delayq.Instance{{URL: "http://a:1", Protocols: []string{"http"}, Since: time.UnixMilli(1e12)}, {URL: "http://b:1", Buckets: []int{2}}}, nil
		}}, []api.Instance{{URL: "http://a:1", Protocols: []string{"http"}, Since: &api.Time{Time: time.UnixMilli(1e12)}}, {URL: "http://b:1", Buckets: []int{2}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAPI(t, tt.opts)
			var got api.ClusterResponse
			a.must(http.StatusOK, "GET", "/v1/cluster", "", &got)
			if diff := cmp.Diff(tt.want, got.Instances); diff != "" {
				t.Errorf("cluster (-want +got):\n%s", diff)
			}
		})
	}
}

func TestClusterError(t *testing.T) {
	t.Parallel()
	var logged bytes.Buffer
	a := newAPI(t, Options{Logger: slogTo(&logged), Cluster: func(context.Context) ([]delayq.Instance, error) {
		return nil, errors.New("redis is on fire")
	}})
	code, body := a.do("GET", "/v1/cluster", "")
	if e := errorOf(t, body); code != 500 || e.Code != "internal" || strings.Contains(e.Message, "fire") {
		t.Errorf("cluster failure = %d %+v, want 500 internal without internals", code, e)
	}
	if n := strings.Count(logged.String(), "redis is on fire"); n != 1 {
		t.Errorf("log = %q, want the error logged once", logged.String())
	}
}

func TestHealthz(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	var ok map[string]string
	a.must(http.StatusOK, "GET", "/healthz", "", &ok)
	if ok["status"] != "ok" {
		t.Errorf("healthz = %v, want status ok", ok)
	}
	a.e.Drain()
	code, body := a.do("GET", "/healthz", "")
	if e := errorOf(t, body); code != http.StatusServiceUnavailable || e.Code != "draining" {
		t.Errorf("healthz while draining = %d %+v, want 503 draining", code, e)
	}
	code, body = a.do("POST", "/v1/topics/t/jobs", `{}`)
	if e := errorOf(t, body); code != http.StatusServiceUnavailable || e.Code != "draining" {
		t.Errorf("put while draining = %d %+v, want 503 draining", code, e)
	}
}

func TestMetrics(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("t", `{}`)
	code, body := a.do("GET", "/metrics", "")
	if code != 200 || !strings.Contains(body, `delayq_operations_total{op="put",result="ok"} 1`) {
		t.Errorf("metrics = %d, want the put counted:\n%s", code, body)
	}
}

func TestUI(t *testing.T) {
	t.Parallel()
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("dashboard " + r.URL.Path)) })
	a := newAPI(t, Options{UI: ui})
	code, body := a.do("GET", "/ui/topics", "")
	if code != 200 || body != "dashboard /ui/topics" {
		t.Errorf("GET /ui/topics = %d %q, want the dashboard with the full path", code, body)
	}
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != http.StatusFound || w.Header().Get("Location") != "/ui/" {
		t.Errorf("GET / = %d to %q, want a redirect to /ui/", w.Code, w.Header().Get("Location"))
	}
}

// TestReserveLongPoll runs over a real socket: a waiting reserve is handed
// a job put meanwhile, and a reserve whose wait runs out answers [].
func TestReserveLongPoll(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	srv := httptest.NewServer(a.h)
	defer srv.Close()

	start := time.Now()
	resp := post(t, srv.URL+"/v1/reserve", `{"topics":["t"],"wait":"50ms"}`)
	if got := decodeJobs(t, resp); got == nil || len(got) != 0 || time.Since(start) < 50*time.Millisecond {
		t.Errorf("reserve on an empty topic = %v after %v, want [] after the 50ms wait", got, time.Since(start))
	}

	done := make(chan []api.Job, 1)
	go func() { done <- decodeJobs(t, post(t, srv.URL+"/v1/reserve", `{"topics":["other","t"],"wait":"10s"}`)) }()
	waitFor(t, func() bool { return a.e.Waiting("t") == 1 })
	start = time.Now()
	a.put("t", `{"id":"late","body":"hi"}`)
	select {
	case got := <-done:
		if len(got) != 1 || got[0].ID != "late" || *got[0].Body != "hi" {
			t.Errorf("long-poll = %+v, want the job put meanwhile", got)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("long-poll answered %v after the put, want well under 1s", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("long-poll was not handed the job put meanwhile within 5s")
	}
}

// TestReserveClientGone: a client that hangs up ends its wait, and the
// engine's waiter is gone.
func TestReserveClientGone(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	srv := httptest.NewServer(a.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/v1/reserve", strings.NewReader(`{"topics":["t"],"wait":"5m"}`))
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		errc <- err
	}()
	waitFor(t, func() bool { return a.e.Waiting("t") == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error = %v, want canceled", err)
	}
	waitFor(t, func() bool { return a.e.Waiting("t") == 0 })
	a.put("t", `{"id":"after"}`)
	if jobs := a.reserve("t", 1); len(jobs) != 1 || jobs[0].ID != "after" {
		t.Errorf("reserve after the gone client = %+v, want the job, not lost to the gone client", jobs)
	}
}

// TestReserveWaitInBubble checks the long-poll on fake time: the wait
// lasts exactly as asked, and a job made ready by the timer ends it.
func TestReserveWaitInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMemAPI(t, Options{})
		a.put("t", `{"id":"soon","delay":"20s","ttr":"1h"}`)
		start := time.Now()
		var r api.JobsResponse
		a.must(http.StatusOK, "POST", "/v1/reserve", `{"topics":["t"],"wait":"5m"}`, &r)
		if len(r.Jobs) != 1 || r.Jobs[0].ID != "soon" || time.Since(start) != 20*time.Second {
			t.Errorf("reserve = %+v after %v, want soon after exactly 20s", r.Jobs, time.Since(start))
		}
		start = time.Now()
		a.must(http.StatusOK, "POST", "/v1/reserve", `{"topics":["t"],"wait":90}`, &r)
		if len(r.Jobs) != 0 || time.Since(start) != 90*time.Second {
			t.Errorf("reserve = %+v after %v, want [] after exactly 90s", r.Jobs, time.Since(start))
		}
	})
}

func post(t *testing.T, url, body string) *http.Response {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Errorf("POST %s: %v", url, err)
		return nil
	}
	return resp
}

func decodeJobs(t *testing.T, resp *http.Response) []api.Job {
	t.Helper()
	if resp == nil {
		return nil
	}
	defer resp.Body.Close()
	var r api.JobsResponse
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 {
		t.Errorf("reserve answered %d: %v", resp.StatusCode, err)
	}
	return r.Jobs
}

// waitFor polls cond for up to 5 s: for tests over real sockets, where
// synctest cannot tell when the server is blocked.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
	}
}

// TestAnswersSurviveRestart: what the API acknowledged is there after the
// server restarts on the same data directory, reservation included.
func TestAnswersSurviveRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	open := func() (*testAPI, func()) {
		st, err := diskstore.Open(dir, diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
		if err != nil {
			t.Fatalf("diskstore.Open: %v", err)
		}
		e := engine.New(st, engine.Config{Logger: discard()})
		return &testAPI{t: t, e: e, h: NewHandler(e, Options{Logger: discard()})}, func() { st.Close() }
	}
	a, stop := open()
	a.put("t", `{"id":"kept","body":"b","delay":"1h"}`)
	a.put("t", `{"id":"held","ttr":"1h"}`)
	held := a.reserve("t", 1)[0]
	stop()

	a, stop = open()
	defer stop()
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/kept", "", &j)
	if j.State != "delayed" || *j.Body != "b" {
		t.Errorf("kept after restart = %+v, want delayed with body b", j)
	}
	a.must(http.StatusOK, "POST", "/v1/jobs/held/finish", `{"reservation":"`+held.Reservation+`"}`, &j)
}

// TestStoreUnavailable: a store that fails answers 503 unavailable.
func TestStoreUnavailable(t *testing.T) {
	t.Parallel()
	st := memstore.New()
	e := engine.New(st, engine.Config{Logger: discard()})
	var logged bytes.Buffer
	h := NewHandler(e, Options{Logger: slogTo(&logged)})
	st.Close()
	w := serve(h, "GET", "/v1/jobs/x", "")
	if e := errorOf(t, w.Body.String()); w.Code != http.StatusServiceUnavailable || e.Code != api.CodeUnavailable {
		t.Errorf("GET with a closed store = %d %+v, want 503 unavailable", w.Code, e)
	}
	if !strings.Contains(logged.String(), "unavailable") {
		t.Errorf("log = %q, want the failure logged", logged.String())
	}
}
