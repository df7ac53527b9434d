package httpapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// newRetainingAPI serves from a memstore that keeps ended jobs an hour.
func newRetainingAPI(t *testing.T) *testAPI {
	t.Helper()
	return startAPI(t, memstore.Open(memstore.Options{Retention: store.Retention{For: time.Hour, Bodies: true}}), Options{})
}

// getJob reads GET /v1/jobs/{id}.
func (a *testAPI) getJob(id string) api.Job {
	a.t.Helper()
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/"+id, "", &j)
	return j
}

// TestRetainedJobOverHTTP: a finished job reads back as finished, with
// when it ended and its attempts (who reserved it: the client's address
// on a server without tokens; how each ended and why), and is listed by
// state=finished; released, deleted and failed jobs likewise.
func TestRetainedJobOverHTTP(t *testing.T) {
	a := newRetainingAPI(t)
	a.put("t", `{"id":"order-1","body":"x"}`)
	r := a.reserve("t", 1)[0]
	a.must(http.StatusOK, "POST", "/v1/jobs/order-1/release", `{"reservation":"`+r.Reservation+`","reason":"upstream 503"}`, nil)
	r = a.reserve("t", 1)[0]
	if len(r.History) != 2 || r.History[1].EndedAt != nil || r.History[1].Outcome != "" {
		t.Errorf("reserve answer's history = %+v, want two attempts, the second in progress", r.History)
	}
	var fin, again api.Job
	a.must(http.StatusOK, "POST", "/v1/jobs/order-1/finish", `{"reservation":"`+r.Reservation+`"}`, &fin)
	if fin.State != "finished" || fin.EndedAt == nil || fin.Reservation != "" {
		t.Errorf("finish answered %+v, want the job as it now is: finished, ended_at, no reservation", fin)
	}
	// The same finish sent again (its answer lost) succeeds with the job
	// as it now is; the batch finish likewise.
	a.must(http.StatusOK, "POST", "/v1/jobs/order-1/finish", `{"reservation":"`+r.Reservation+`"}`, &again)
	if again.State != "finished" || again.EndedAt == nil || !again.EndedAt.Equal(fin.EndedAt.Time) {
		t.Errorf("finish sent again answered %+v, want the finished job", again)
	}
	var batch api.FinishBatchResponse
	a.must(http.StatusOK, "POST", "/v1/jobs/finish", `{"jobs":[{"id":"order-1","reservation":"`+r.Reservation+`"}]}`, &batch)
	if len(batch.Results) != 1 || !batch.Results[0].OK {
		t.Errorf("batch finish sent again = %+v, want ok", batch)
	}

	j := a.getJob("order-1")
	if j.State != "finished" || j.EndedAt == nil || j.Reservation != "" || j.Body == nil || *j.Body != "x" {
		t.Errorf("GET /v1/jobs/order-1 after finish = %+v, want state finished, ended_at, its body, no reservation", j)
	}
	by := "http 192.0.2.1:1234" // httptest's client address
	if len(j.History) != 2 ||
		j.History[0].Attempt != 1 || j.History[0].By != by || j.History[0].Outcome != "released" || j.History[0].Reason != "upstream 503" || j.History[0].EndedAt == nil ||
		j.History[1].Attempt != 2 || j.History[1].By != by || j.History[1].Outcome != "finished" || j.History[1].EndedAt == nil || !j.History[1].EndedAt.Equal(j.EndedAt.Time) {
		t.Errorf("GET /v1/jobs/order-1 history = %+v, want released (upstream 503) then finished, both by %s", j.History, by)
	}

	a.put("t", `{"id":"revoked"}`)
	a.must(http.StatusOK, "DELETE", "/v1/jobs/revoked", "", nil)
	if j := a.getJob("revoked"); j.State != "deleted" || len(j.History) != 0 {
		t.Errorf("GET /v1/jobs/revoked after DELETE = state %s, history %+v; want deleted, none", j.State, j.History)
	}
	a.put("t", `{"id":"poison","max_attempts":1}`)
	p := a.reserve("t", 1)[0]
	a.must(http.StatusOK, "POST", "/v1/jobs/poison/release", `{"reservation":"`+p.Reservation+`","reason":"bad input"}`, nil)
	a.must(http.StatusOK, "DELETE", "/v1/jobs/poison", "", nil)
	if j := a.getJob("poison"); j.State != "failed" || len(j.History) != 1 || j.History[0].Outcome != "buried" {
		t.Errorf("GET /v1/jobs/poison = state %s, history %+v; want failed, its one attempt buried", j.State, j.History)
	}

	for state, want := range map[string]string{"finished": "order-1", "deleted": "revoked", "failed": "poison"} {
		var l api.JobsResponse
		a.must(http.StatusOK, "GET", "/v1/topics/t/jobs?state="+state, "", &l)
		if len(l.Jobs) != 1 || l.Jobs[0].ID != want || l.Jobs[0].State != state {
			t.Errorf("GET /v1/topics/t/jobs?state=%s = %+v, want %s alone", state, l.Jobs, want)
		}
	}
	var all api.JobsResponse
	a.must(http.StatusOK, "GET", "/v1/topics/t/jobs", "", &all)
	if len(all.Jobs) != 0 {
		t.Errorf("GET /v1/topics/t/jobs (every live state) = %+v, want no retained job", all.Jobs)
	}
	code, body := a.do("GET", "/v1/topics/t/jobs?state=gone", "")
	if e := errorOf(t, body); code != http.StatusBadRequest || e.Code != "bad_state" || !strings.Contains(e.Message, "finished") {
		t.Errorf("GET ?state=gone = %d %s, want 400 bad_state naming the states", code, body)
	}
	// A retained job takes no transition.
	code, body = a.do("POST", "/v1/jobs/order-1/kick", "")
	if e := errorOf(t, body); code != http.StatusNotFound || e.Code != "not_found" {
		t.Errorf("kick of a finished job = %d %s, want 404 not_found", code, body)
	}
}

// TestPutOfTakenIDSaysState: a put (single, batch, or the original
// protocol's add) whose id a finished or live job has answers 409 exists
// with that job's state, and stores nothing.
func TestPutOfTakenIDSaysState(t *testing.T) {
	a := newRetainingAPI(t)
	a.put("t", `{"id":"done"}`)
	r := a.reserve("t", 1)[0]
	a.must(http.StatusOK, "POST", "/v1/jobs/done/finish", `{"reservation":"`+r.Reservation+`"}`, nil)
	a.put("t", `{"id":"waiting","delay":"1h"}`)

	cases := []struct{ path, body, id, state string }{
		{"/v1/topics/t/jobs", `{"id":"done"}`, "done", "finished"},
		{"/v1/topics/u/jobs", `{"id":"waiting"}`, "waiting", "delayed"},
		{"/v1/topics/t/jobs/batch", `{"jobs":[{"id":"new"},{"id":"done"}]}`, "done", "finished"},
	}
	for _, c := range cases {
		code, body := a.do("POST", c.path, c.body)
		e := errorOf(t, body)
		if code != http.StatusConflict || e.Code != "exists" || e.State != c.state || !strings.Contains(e.Message, `"`+c.id+`" already exists (`+c.state+`)`) {
			t.Errorf("POST %s %s = %d %s, want 409 exists with state %s", c.path, c.body, code, body, c.state)
		}
	}
	a.must(http.StatusNotFound, "GET", "/v1/jobs/new", "", nil)

	code, body := a.do("POST", "/v1/command", `{"command":"add","topic":"t","id":"done","body":"again"}`)
	var cr api.CommandResponse
	if err := json.Unmarshal([]byte(body), &cr); err != nil || code != http.StatusOK || cr.Success || cr.State != "finished" || !strings.Contains(cr.Error, "already exists") {
		t.Errorf("original add of a finished id = %d %s, want success false, state finished", code, body)
	}
}

// TestOriginalFinishKeepsFinished: the original protocol's pop and
// finish by id leave a finished job with its attempt.
func TestOriginalFinishKeepsFinished(t *testing.T) {
	a := newRetainingAPI(t)
	a.must(http.StatusOK, "POST", "/", `{"command":"add","topic":"t","id":"o1","body":"x"}`, nil)
	a.must(http.StatusOK, "POST", "/", `{"command":"pop","topic":"t"}`, nil)
	a.must(http.StatusOK, "POST", "/", `{"command":"finish","id":"o1"}`, nil)
	j := a.getJob("o1")
	if j.State != "finished" || len(j.History) != 1 || j.History[0].Outcome != "finished" || j.History[0].By != "http 192.0.2.1:1234" {
		t.Errorf("GET /v1/jobs/o1 after pop and finish = state %s, history %+v; want finished by the client", j.State, j.History)
	}
}

// TestAttemptByPrincipal: behind the guard with tokens, an attempt
// names the token's principal, not the address.
func TestAttemptByPrincipal(t *testing.T) {
	a := newRetainingAPI(t)
	tokens, err := auth.Load("", `{"tokens":[{"name":"billing-worker","sha256":"`+auth.HashToken("w-token")+`","scopes":["admin"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	g := Guard(a.e, a.h, GuardOptions{Auth: tokens, Logger: discard()})
	a.put("t", `{"id":"a"}`)
	req := httptest.NewRequest("POST", "/v1/reserve", strings.NewReader(`{"topics":["t"]}`))
	req.Header.Set("Authorization", "Bearer w-token")
	w := httptest.NewRecorder()
	g.ServeHTTP(w, req)
	var res api.JobsResponse
	if err := json.Unmarshal(w.Body.Bytes(), &res); err != nil || w.Code != http.StatusOK || len(res.Jobs) != 1 {
		t.Fatalf("reserve with a token = %d %s", w.Code, w.Body)
	}
	if h := res.Jobs[0].History; len(h) != 1 || h[0].By != "billing-worker" {
		t.Errorf("reserve with billing-worker's token: history %+v, want one attempt by billing-worker", h)
	}
}
