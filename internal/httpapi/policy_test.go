package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
)

const fullPolicy = `{"ttr":"30s","max_attempts":3,"backoff":{"initial":"1s","max":"10m","factor":2,"jitter":0.1},"max_jobs":100}`

func TestPolicyPutGetDelete(t *testing.T) {
	a := newAPI(t, Options{})
	a.must(http.StatusNotFound, "GET", "/v1/topics/orders/policy", "", nil)
	var p api.Policy
	a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", fullPolicy, &p)
	want := `{"topic":"orders","ttr":"30s","max_attempts":3,"backoff":{"initial":"1s","max":"10m0s","factor":2,"jitter":0.1},"max_jobs":100}`
	if b, _ := json.Marshal(p); string(b) != want {
		t.Errorf("PUT answered %s, want %s", b, want)
	}
	_, got := a.do("GET", "/v1/topics/orders/policy", "")
	if strings.TrimSpace(got) != want {
		t.Errorf("GET = %s, want %s", got, want)
	}
	// A replacement is whole: fields it leaves out are gone; the
	// backoff's defaults fill in.
	a.must(http.StatusOK, "PUT", "/v1/topics/orders/policy", `{"backoff":{"initial":"2s"}}`, &p)
	want = `{"topic":"orders","backoff":{"initial":"2s","max":"1h0m0s","factor":2,"jitter":0}}`
	if _, got := a.do("GET", "/v1/topics/orders/policy", ""); strings.TrimSpace(got) != want {
		t.Errorf("GET after the replacement = %s, want %s", got, want)
	}
	var all api.PoliciesResponse
	a.must(http.StatusCreated, "PUT", "/v1/topics/a.b/policy", `{"max_jobs":1}`, nil)
	a.must(http.StatusOK, "GET", "/v1/policies", "", &all)
	if len(all.Policies) != 2 || all.Policies[0].Topic != "a.b" || all.Policies[1].Topic != "orders" {
		t.Errorf("GET /v1/policies = %+v", all)
	}
	a.must(http.StatusNoContent, "DELETE", "/v1/topics/orders/policy", "", nil)
	status, body := a.do("GET", "/v1/topics/orders/policy", "")
	if status != http.StatusNotFound || errorOf(t, body).Message != `topic "orders" has no policy` {
		t.Errorf("GET after DELETE = %d %s", status, body)
	}
	a.must(http.StatusNotFound, "DELETE", "/v1/topics/orders/policy", "", nil)
}

func TestPolicyInvalidChangesNothing(t *testing.T) {
	a := newMemAPI(t, Options{})
	a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", fullPolicy, nil)
	_, before := a.do("GET", "/v1/topics/orders/policy", "")
	for _, tc := range []struct{ body, code string }{
		{``, "bad_json"},
		{`{}`, "bad_policy"},
		{`[]`, "bad_json"},
		{`{"ttr":"30s"} {}`, "bad_json"},
		{`{"ttl":"30s"}`, "unknown_field"},
		{`{"backoff":{"initial":"1s","step":2}}`, "unknown_field"},
		{`{"ttr":"0s"}`, "bad_ttr"},
		{`{"ttr":"-5s"}`, "bad_ttr"},
		{`{"ttr":"soon"}`, "bad_json"},
		{`{"max_attempts":0}`, "bad_max_attempts"},
		{`{"max_attempts":-1}`, "bad_max_attempts"},
		{`{"max_jobs":0}`, "bad_max_jobs"},
		{`{"max_jobs":-3}`, "bad_max_jobs"},
		{`{"max_jobs":1.5}`, "bad_json"},
		{`{"backoff":{}}`, "bad_backoff"},
		{`{"backoff":{"initial":"0s"}}`, "bad_backoff"},
		{`{"backoff":{"initial":"-1s"}}`, "bad_backoff"},
		{`{"backoff":{"initial":"10s","max":"5s"}}`, "bad_backoff"},
		{`{"backoff":{"initial":"1s","max":"-1s"}}`, "bad_backoff"},
		{`{"backoff":{"initial":"1s","factor":0.5}}`, "bad_backoff"},
		{`{"backoff":{"initial":"1s","factor":1000}}`, "bad_backoff"},
		{`{"backoff":{"initial":"1s","jitter":-0.1}}`, "bad_backoff"},
		{`{"backoff":{"initial":"1s","jitter":1.5}}`, "bad_backoff"},
		{`{"backoff":{"initial":"800d"}}`, "bad_backoff"},
	} {
		status, body := a.do("PUT", "/v1/topics/orders/policy", tc.body)
		if status != http.StatusBadRequest || errorOf(t, body).Code != tc.code {
			t.Errorf("PUT %s = %d %s, want 400 %s", tc.body, status, body, tc.code)
		}
	}
	status, body := a.do("PUT", "/v1/topics/-bad/policy", fullPolicy)
	if status != http.StatusBadRequest || errorOf(t, body).Code != "bad_topic" {
		t.Errorf("PUT of a bad topic = %d %s", status, body)
	}
	if _, after := a.do("GET", "/v1/topics/orders/policy", ""); after != before {
		t.Errorf("refused PUTs changed the policy: %s, was %s", after, before)
	}
	if status, _ := a.do("GET", "/v1/topics/-bad/policy", ""); status != http.StatusBadRequest {
		t.Errorf("GET of a bad topic = %d, want 400", status)
	}
}

// openDisk serves from a diskstore in dir and returns a stop that closes
// it, so a test can open the same data again.
func openDisk(t *testing.T, dir string) (*testAPI, func()) {
	t.Helper()
	st, err := diskstore.Open(dir, diskstore.Options{MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatalf("diskstore.Open: %v", err)
	}
	e := engine.New(st, engine.Config{Logger: discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		<-done
		if err := st.Close(); err != nil {
			t.Errorf("closing the store: %v", err)
		}
	}
	t.Cleanup(stop)
	return &testAPI{t: t, e: e, h: NewHandler(e, Options{Logger: discard()})}, stop
}

func TestPolicyDurableAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	a, stop := openDisk(t, dir)
	a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", fullPolicy, nil)
	a.must(http.StatusCreated, "PUT", "/v1/topics/gone/policy", `{"max_jobs":5}`, nil)
	a.must(http.StatusNoContent, "DELETE", "/v1/topics/gone/policy", "", nil)
	_, before := a.do("GET", "/v1/topics/orders/policy", "")
	stop()

	a, _ = openDisk(t, dir)
	if _, after := a.do("GET", "/v1/topics/orders/policy", ""); after != before {
		t.Errorf("after a restart GET = %s, want %s", after, before)
	}
	a.must(http.StatusNotFound, "GET", "/v1/topics/gone/policy", "", nil)
	// The reopened engine applies it too: the put takes the policy's ttr.
	p := a.put("orders", `{"body":"x"}`)
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/"+p.ID, "", &j)
	if j.TTR != 30 || j.MaxAttempts != 3 {
		t.Errorf("a job put after the restart has ttr %v, max_attempts %d; want the policy's 30, 3", j.TTR, j.MaxAttempts)
	}
}

func TestPolicyDefaultsPerProtocol(t *testing.T) {
	a := newMemAPI(t, Options{})
	a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", `{"ttr":"45s","max_attempts":4}`, nil)
	get := func(id string) api.Job {
		var j api.Job
		a.must(http.StatusOK, "GET", "/v1/jobs/"+id, "", &j)
		return j
	}
	for _, tc := range []struct {
		name, topic, body string
		ttr               float64
		maxAttempts       int
	}{
		{"neither given", "orders", `{"id":"a","body":"x"}`, 45, 4},
		{"both given", "orders", `{"id":"b","body":"x","ttr":"5s","max_attempts":0}`, 5, 0},
		{"other topic", "other", `{"id":"c","body":"x"}`, 60, 0},
	} {
		a.put(tc.topic, tc.body)
		var in struct{ ID string }
		_ = json.Unmarshal([]byte(tc.body), &in)
		if j := get(in.ID); j.TTR != tc.ttr || j.MaxAttempts != tc.maxAttempts {
			t.Errorf("%s: ttr %v, max_attempts %d; want %v, %d", tc.name, j.TTR, j.MaxAttempts, tc.ttr, tc.maxAttempts)
		}
	}
	// The original protocol: TTR absent takes the policy's; it has no
	// max_attempts, so the policy's always applies.
	for _, tc := range []struct {
		body string
		ttr  float64
	}{
		{`{"command":"add","topic":"orders","id":"o1","body":"x"}`, 45},
		{`{"command":"add","topic":"orders","id":"o2","body":"x","TTR":7}`, 7},
	} {
		var resp api.CommandResponse
		a.must(http.StatusOK, "POST", "/", tc.body, &resp)
		if !resp.Success {
			t.Fatalf("%s = %+v", tc.body, resp)
		}
		if j := get(resp.ID); j.TTR != tc.ttr || j.MaxAttempts != 4 {
			t.Errorf("%s: ttr %v, max_attempts %d; want %v, 4", tc.body, j.TTR, j.MaxAttempts, tc.ttr)
		}
	}
}

func TestPolicyMaxJobs(t *testing.T) {
	a := newAPI(t, Options{})
	a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", `{"max_jobs":3}`, nil)
	a.put("orders", `{"id":"a","body":"x"}`)
	a.put("orders", `{"id":"b","body":"x","delay":"1h"}`)
	// A batch that does not fit is refused whole.
	status, body := a.do("POST", "/v1/topics/orders/jobs/batch", `{"jobs":[{"id":"c","body":"x"},{"id":"d","body":"x"}]}`)
	if e := errorOf(t, body); status != http.StatusTooManyRequests || e.Code != "topic_full" || !strings.Contains(e.Message, "max_jobs is 3") {
		t.Fatalf("a batch past max_jobs = %d %s, want 429 topic_full", status, body)
	}
	a.must(http.StatusNotFound, "GET", "/v1/jobs/c", "", nil)
	a.put("orders", `{"id":"c","body":"x"}`)
	// Reserved and buried jobs count as well.
	j := a.reserve("orders", 1)[0]
	a.must(http.StatusOK, "POST", "/v1/jobs/"+j.ID+"/bury", `{"reservation":"`+j.Reservation+`"}`, nil)
	status, body = a.do("POST", "/v1/topics/orders/jobs", `{"id":"d","body":"x"}`)
	if status != http.StatusTooManyRequests || errorOf(t, body).Code != "topic_full" {
		t.Fatalf("a put past max_jobs = %d %s, want 429 topic_full", status, body)
	}
	var resp api.CommandResponse
	a.must(http.StatusOK, "POST", "/", `{"command":"add","topic":"orders","id":"d","body":"x"}`, &resp)
	if resp.Success || !strings.Contains(resp.Error, "max_jobs") {
		t.Errorf("the original protocol's add past max_jobs = %+v, want success false naming max_jobs", resp)
	}
	a.put("other", `{"id":"o","body":"x"}`) // other topics are not bounded
	a.must(http.StatusOK, "DELETE", "/v1/jobs/"+j.ID, "", nil)
	a.put("orders", `{"id":"d","body":"x"}`)
	a.must(http.StatusNoContent, "DELETE", "/v1/topics/orders/policy", "", nil)
	a.put("orders", `{"id":"e","body":"x"}`)
}

// A consumer's release without a delay waits out the topic's backoff
// for its attempt; with a delay it waits that delay.
func TestPolicyBackoffOnRelease(t *testing.T) {
	a := newMemAPI(t, Options{})
	a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", `{"backoff":{"initial":"1h","factor":2,"max":"24h","jitter":0.2}}`, nil)
	b := store.Backoff{Initial: time.Hour, Max: 24 * time.Hour, Factor: 2, Jitter: 0.2}
	a.put("orders", `{"id":"a","body":"x"}`)
	for attempt := 1; attempt <= 2; attempt++ {
		if attempt == 2 {
			a.must(http.StatusOK, "POST", "/v1/jobs/a/kick", "", nil)
		}
		j := a.reserve("orders", 1)[0]
		before := time.Now()
		var got api.Job
		a.must(http.StatusOK, "POST", "/v1/jobs/a/release", `{"reservation":"`+j.Reservation+`"}`, &got)
		after := delayq.CeilMilli(time.Now())
		d := b.Delay("a", attempt)
		if got.State != "delayed" || got.Due.Before(before.Add(d)) || got.Due.After(after.Add(d)) {
			t.Errorf("release %d without a delay: %s due %s, want delayed due %s after the release", attempt, got.State, got.Due.Time, d)
		}
	}
	a.must(http.StatusOK, "POST", "/v1/jobs/a/kick", "", nil)
	j := a.reserve("orders", 1)[0]
	var got api.Job
	a.must(http.StatusOK, "POST", "/v1/jobs/a/release", `{"reservation":"`+j.Reservation+`","delay":"5s"}`, &got)
	if d := time.Until(got.Due.Time); d > 5*time.Second+time.Millisecond || d < 4*time.Second {
		t.Errorf("release with delay 5s: due in %s", d)
	}
}

// A job whose TTR runs out in a topic with a backoff goes delayed until
// its deadline plus the backoff, over the HTTP API's real timer.
func TestPolicyBackoffOnTTRExpiry(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMemAPI(t, Options{})
		a.must(http.StatusCreated, "PUT", "/v1/topics/orders/policy", `{"backoff":{"initial":"30s"}}`, nil)
		a.put("orders", `{"id":"a","body":"x","ttr":"2s"}`)
		j := a.reserve("orders", 1)[0]
		time.Sleep(2*time.Second + time.Millisecond)
		synctest.Wait()
		var got api.Job
		a.must(http.StatusOK, "GET", "/v1/jobs/a", "", &got)
		if want := j.Deadline.Add(30 * time.Second); got.State != "delayed" || !got.Due.Equal(want) {
			t.Fatalf("after the TTR ran out: %s due %s, want delayed due %s", got.State, got.Due.Time, want)
		}
		if jobs := a.reserve("orders", 1); len(jobs) != 0 {
			t.Fatalf("reserved %d jobs during the backoff", len(jobs))
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if jobs := a.reserve("orders", 1); len(jobs) != 1 {
			t.Fatalf("reserved %d jobs after the backoff, want 1", len(jobs))
		}
	})
}
