package httpapi

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/delayq/delayq/api"
)

func ptr[T any](v T) *T { return &v }

func TestPutGetDelete(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	before := time.Now().Truncate(time.Millisecond)
	p := a.put("orderclose", `{"id":"orderclose-42","body":"close it","delay":"30m"}`)
	if p.ID != "orderclose-42" || p.Seq == 0 {
		t.Fatalf("put = %+v, want id orderclose-42 and a seq", p)
	}
	var got api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/orderclose-42", "", &got)
	want := api.Job{ID: "orderclose-42", Seq: p.Seq, Topic: "orderclose", State: "delayed",
		Body: ptr("close it"), Priority: 1024, TTR: 60}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(api.Job{}, "Due", "Created")); diff != "" {
		t.Errorf("GET job (-want +got):\n%s", diff)
	}
	// Created is the put's millisecond; due is 30m after the put's exact
	// instant, rounded up to the next millisecond so it is never early.
	if d := got.Due.Sub(got.Created.Time); d < 30*time.Minute || d > 30*time.Minute+time.Millisecond || got.Created.Before(before) {
		t.Errorf("due %v, created %v: want due 30m (+ at most 1ms) after created, created after %v", got.Due, got.Created, before)
	}
	_, raw := a.do("GET", "/v1/jobs/orderclose-42", "")
	if !strings.Contains(raw, `"due":"`+got.Due.UTC().Format(api.TimeLayout)+`"`) {
		t.Errorf("GET job = %s, want due in RFC 3339 with milliseconds", raw)
	}
	var del api.Job
	a.must(http.StatusOK, "DELETE", "/v1/jobs/orderclose-42", "", &del)
	if del.ID != "orderclose-42" || del.State != "delayed" {
		t.Errorf("DELETE = %+v, want the delayed job as it was", del)
	}
	code, body := a.do("GET", "/v1/jobs/orderclose-42", "")
	if code != http.StatusNotFound || errorOf(t, body).Code != api.CodeNotFound {
		t.Errorf("GET deleted job = %d %s, want 404 not_found", code, body)
	}
}

func TestPutDefaultsAndGeneratedID(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	p := a.put("t", `{"body":""}`)
	if p.ID == "" {
		t.Fatalf("put without id = %+v, want a generated id", p)
	}
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/"+p.ID, "", &j)
	if j.State != "ready" || j.TTR != 60 || j.Priority != 1024 || j.MaxAttempts != 0 {
		t.Errorf("job = %+v, want ready, ttr 60, priority 1024, max_attempts 0", j)
	}
}

func TestPutFields(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	at := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	a.put("t", `{"id":"a","body_base64":"`+base64.StdEncoding.EncodeToString([]byte{0xff, 0, 1})+
		`","at":"`+at.Format(time.RFC3339Nano)+`","ttr":"1500ms","priority":7,"max_attempts":3}`)
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/a", "", &j)
	want := api.Job{ID: "a", Seq: j.Seq, Topic: "t", State: "delayed", BodyBase64: ptr("/wAB"),
		Priority: 7, TTR: 1.5, MaxAttempts: 3, Due: api.Time{Time: at}, Created: j.Created}
	if diff := cmp.Diff(want, j, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
		t.Errorf("job (-want +got):\n%s", diff)
	}
}

func TestTopicWithSlashIsPercentEncoded(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("shop%2Forders", `{"id":"x","body":"b"}`)
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/x", "", &j)
	if j.Topic != "shop/orders" {
		t.Errorf("topic = %q, want shop/orders", j.Topic)
	}
	var tp api.Topic
	a.must(http.StatusOK, "GET", "/v1/topics/shop%2Forders", "", &tp)
	if tp.Name != "shop/orders" || tp.Ready != 1 {
		t.Errorf("topic = %+v, want shop/orders with 1 ready", tp)
	}
}

// TestErrors checks every error code of the v1 API, its status and that the
// message names the problem.
func TestErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("t", `{"id":"live","body":"x"}`)
	tests := []struct {
		name, method, path, body string
		status                   int
		code, mention            string
	}{
		{"syntax", "POST", "/v1/topics/t/jobs", `{"body":`, 400, "bad_json", "ends too early"},
		{"not json", "POST", "/v1/topics/t/jobs", `hello`, 400, "bad_json", "invalid"},
		{"empty body", "POST", "/v1/topics/t/jobs", ``, 400, "bad_json", "empty"},
		{"trailing garbage", "POST", "/v1/topics/t/jobs", `{"body":"x"} {}`, 400, "bad_json", "more than one"},
		{"not an object", "POST", "/v1/topics/t/jobs", `[1]`, 400, "bad_json", "JSON object"},
		{"wrong type", "POST", "/v1/topics/t/jobs", `{"priority":"high"}`, 400, "bad_json", "priority"},
		{"unknown field", "POST", "/v1/topics/t/jobs", `{"bdy":"x"}`, 400, "unknown_field", "bdy"},
		{"bad topic", "POST", "/v1/topics/a%20b/jobs", `{}`, 400, "bad_topic", "a b"},
		{"topic starts with dash", "GET", "/v1/topics/-x", ``, 400, "bad_topic", "-x"},
		{"bad id in body", "POST", "/v1/topics/t/jobs", `{"id":"a b"}`, 400, "bad_id", "a b"},
		{"bad id in path", "GET", "/v1/jobs/a%20b", ``, 400, "bad_id", "a b"},
		{"body too big", "POST", "/v1/topics/t/jobs", `{"body":"` + strings.Repeat("x", 65536) + `"}`, 400, "body_too_big", "65536"},
		{"delay and at", "POST", "/v1/topics/t/jobs", `{"delay":1,"at":"2030-01-01T00:00:00Z"}`, 400, "bad_delay", "not both"},
		{"negative delay", "POST", "/v1/topics/t/jobs", `{"delay":"-1s"}`, 400, "bad_delay", "negative"},
		{"bad duration", "POST", "/v1/topics/t/jobs", `{"delay":"soon"}`, 400, "bad_json", "soon"},
		{"zero at", "POST", "/v1/topics/t/jobs", `{"at":"0001-01-01T00:00:00Z"}`, 400, "bad_at", "usable"},
		{"bad at", "POST", "/v1/topics/t/jobs", `{"at":"tomorrow"}`, 400, "bad_json", "RFC 3339"},
		{"reserve negative wait", "POST", "/v1/reserve", `{"topics":["t"],"wait":"-1s"}`, 400, "bad_wait", "negative"},
		{"ttr zero", "POST", "/v1/topics/t/jobs", `{"ttr":0}`, 400, "bad_ttr", "minimum"},
		{"body and base64", "POST", "/v1/topics/t/jobs", `{"body":"x","body_base64":"eA=="}`, 400, "bad_body", "not both"},
		{"bad base64", "POST", "/v1/topics/t/jobs", `{"body_base64":"!!"}`, 400, "bad_body", "base64"},
		{"exists", "POST", "/v1/topics/t/jobs", `{"id":"live"}`, 409, "exists", "live"},
		{"too large", "POST", "/v1/topics/t/jobs", `{"body":"` + strings.Repeat("x", 1<<20) + `"}`, 413, "request_too_large", "limit"},
		{"batch too big", "POST", "/v1/topics/t/jobs/batch", `{"jobs":[` + strings.Repeat(`{},`, 1000) + `{}]}`, 400, "batch_too_big", "1001"},
		{"batch bad element", "POST", "/v1/topics/t/jobs/batch", `{"jobs":[{},{"ttr":0}]}`, 400, "bad_ttr", "jobs[1]"},
		{"batch empty", "POST", "/v1/topics/t/jobs/batch", `{"jobs":[]}`, 400, "bad_batch", "no jobs"},
		{"reserve no topics", "POST", "/v1/reserve", `{"topics":[]}`, 400, "bad_topics", "at least one"},
		{"reserve bad topic", "POST", "/v1/reserve", `{"topics":["a b"]}`, 400, "bad_topic", "a b"},
		{"reserve wait over max", "POST", "/v1/reserve", `{"topics":["t"],"wait":"6m"}`, 400, "wait_too_long", "maximum"},
		{"reserve n over 1000", "POST", "/v1/reserve", `{"topics":["t"],"n":1001}`, 400, "bad_n", "1001"},
		{"kick n negative", "POST", "/v1/topics/t/kick", `{"n":-1}`, 400, "bad_n", "-1"},
		{"kick n over beanstalkd's bound", "POST", "/v1/topics/t/kick", `{"n":4294967296}`, 400, "bad_n", "4294967296"},
		{"at before 1970", "POST", "/v1/topics/t/jobs", `{"at":"1969-12-31T23:59:59Z"}`, 400, "bad_at", "1969"},
		{"at after 9999", "POST", "/v1/topics/t/jobs", `{"at":"9999-12-31T23:59:59.5Z"}`, 400, "bad_at", "9999"},
		{"update delay and at", "PATCH", "/v1/jobs/live", `{"delay":1,"at":"2030-01-01T00:00:00Z"}`, 400, "bad_delay", "not both"},
		{"huge float delay", "POST", "/v1/topics/t/jobs", `{"delay":1e300}`, 400, "bad_delay", "too large"},
		{"float delay just past the limit", "POST", "/v1/topics/t/jobs", `{"delay":9223372036.854775807}`, 400, "bad_delay", "too large"},
		{"huge ttr in batch", "POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"ttr":-1e300}]}`, 400, "bad_ttr", "too large"},
		{"invalid UTF-8 body", "POST", "/v1/topics/t/jobs", "{\"body\":\"a\xffb\"}", 400, "bad_utf8", "UTF-8"},
		{"lone surrogate body", "POST", "/v1/topics/t/jobs", `{"body":"\ud800"}`, 400, "bad_utf8", "surrogate"},
		{"lone low surrogate", "POST", "/v1/topics/t/jobs", `{"body":"x\udc00"}`, 400, "bad_utf8", "surrogate"},
		{"batch finish too big", "POST", "/v1/jobs/finish", `{"jobs":[` + strings.Repeat(`{"id":"a","reservation":"1-1"},`, 1000) + `{}]}`, 400, "batch_too_big", "1001"},
		{"batch finish not JSON", "POST", "/v1/jobs/finish", `[`, 400, "bad_json", "ends too early"},
		{"batch finish unknown field", "POST", "/v1/jobs/finish", `{"jobs":[{"id":"a","token":"x"}]}`, 400, "unknown_field", "token"},
		{"list bad state", "GET", "/v1/topics/t/jobs?state=gone", ``, 400, "bad_state", "gone"},
		{"list bad limit", "GET", "/v1/topics/t/jobs?limit=x", ``, 400, "bad_limit", "x"},
		{"list limit over", "GET", "/v1/topics/t/jobs?limit=1001", ``, 400, "bad_limit", "1001"},
		{"get unknown", "GET", "/v1/jobs/nope", ``, 404, "not_found", `job "nope" not found`},
		{"delete unknown", "DELETE", "/v1/jobs/nope", ``, 404, "not_found", "nope"},
		{"finish without reservation", "POST", "/v1/jobs/live/finish", `{}`, 400, "bad_reservation", "reservation"},
		{"touch without reservation", "POST", "/v1/jobs/live/touch", `{}`, 400, "bad_reservation", "reservation"},
		{"release without reservation", "POST", "/v1/jobs/live/release", `{}`, 400, "bad_reservation", "reservation"},
		{"bury without reservation", "POST", "/v1/jobs/live/bury", `{}`, 400, "bad_reservation", "reservation"},
		{"finish not reserved", "POST", "/v1/jobs/live/finish", `{"reservation":"1-1"}`, 409, "not_reserved", "live"},
		{"kick ready job", "POST", "/v1/jobs/live/kick", ``, 409, "bad_state", "live"},
		{"unknown path", "GET", "/v2/nothing", ``, 404, "not_found", "/v2/nothing"},
		{"unknown job action", "POST", "/v1/jobs/live/explode", ``, 404, "not_found", "explode"},
		{"wrong method", "GET", "/v1/reserve", ``, 405, "method_not_allowed", "POST"},
		{"wrong method on job", "PUT", "/v1/jobs/live", ``, 405, "method_not_allowed", "PATCH"},
		{"GET / without UI", "GET", "/", ``, 404, "not_found", "/"},
		{"DELETE /", "DELETE", "/", ``, 405, "method_not_allowed", "POST"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := a.do(tt.method, tt.path, tt.body)
			if code != tt.status {
				t.Fatalf("%s %s = %d %s, want %d", tt.method, tt.path, code, body, tt.status)
			}
			e := errorOf(t, body)
			if e.Code != tt.code || !strings.Contains(e.Message, tt.mention) {
				t.Errorf("%s %s error = %+v, want code %s and a message naming %q", tt.method, tt.path, e, tt.code, tt.mention)
			}
		})
	}
	var j api.Job
	a.must(http.StatusOK, "GET", "/v1/jobs/live", "", &j)
	var tp api.TopicsResponse
	a.must(http.StatusOK, "GET", "/v1/topics", "", &tp)
	if len(tp.Topics) != 1 || tp.Topics[0].Ready != 1 {
		t.Errorf("after refused requests topics = %+v, want only the one live job", tp.Topics)
	}
}

func TestMethodNotAllowedHasAllow(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	r := httptest.NewRequest("PUT", "/v1/jobs/x", nil)
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, r)
	if got := w.Header().Get("Allow"); !strings.Contains(got, "GET") || !strings.Contains(got, "DELETE") || !strings.Contains(got, "PATCH") {
		t.Errorf("Allow = %q, want GET, PATCH and DELETE", got)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
}

func TestBatch(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	var got api.BatchResponse
	a.must(http.StatusCreated, "POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"id":"a"},{"id":"b","delay":5},{}]}`, &got)
	if len(got.Jobs) != 3 || got.Jobs[0].ID != "a" || got.Jobs[1].ID != "b" || got.Jobs[2].ID == "" {
		t.Fatalf("batch = %+v, want a, b and a generated id in order", got)
	}
	if !(got.Jobs[0].Seq < got.Jobs[1].Seq && got.Jobs[1].Seq < got.Jobs[2].Seq) {
		t.Errorf("batch seqs = %+v, want increasing", got)
	}
	code, body := a.do("POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"id":"c"},{"id":"b"}]}`)
	if e := errorOf(t, body); code != http.StatusConflict || e.Code != "exists" || !strings.Contains(e.Message, `"b"`) {
		t.Errorf("batch with a live id = %d %+v, want 409 exists naming \"b\"", code, e)
	}
	if code, _ := a.do("GET", "/v1/jobs/c", ""); code != http.StatusNotFound {
		t.Errorf("GET c after a refused batch = %d, want 404: a batch is all or nothing", code)
	}
	a.must(http.StatusCreated, "POST", "/v1/topics/t/jobs/batch", `{"jobs":[`+strings.Repeat(`{},`, 999)+`{}]}`, &got)
	if len(got.Jobs) != 1000 {
		t.Errorf("batch of 1000 put %d jobs", len(got.Jobs))
	}
}

// TestConsumerActions walks reserve, touch, release, bury, kick and finish,
// and checks that a stale reservation is refused.
func TestConsumerActions(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("t", `{"id":"j","body":"b","ttr":30}`)
	jobs := a.reserve("t", 5)
	if len(jobs) != 1 || jobs[0].ID != "j" || jobs[0].State != "reserved" || jobs[0].Reservation == "" || jobs[0].Deadline == nil || jobs[0].Attempts != 1 {
		t.Fatalf("reserve = %+v, want j reserved with a reservation, deadline and 1 attempt", jobs)
	}
	first := jobs[0]
	if d := first.Deadline.Sub(time.Now()); d <= 25*time.Second || d > 30*time.Second {
		t.Errorf("deadline in %v, want about the TTR of 30s", d)
	}
	res := `{"reservation":"` + first.Reservation + `"}`
	var j api.Job
	a.must(http.StatusOK, "POST", "/v1/jobs/j/touch", res, &j)
	a.must(http.StatusOK, "POST", "/v1/jobs/j/release", `{"reservation":"`+first.Reservation+`","priority":5}`, &j)
	if j.State != "ready" || j.Priority != 5 || j.Reservation != "" {
		t.Errorf("released job = %+v, want ready, priority 5, no reservation", j)
	}
	code, body := a.do("POST", "/v1/jobs/j/finish", res)
	if e := errorOf(t, body); code != http.StatusConflict || e.Code != api.CodeNotReserved {
		t.Errorf("finish with a stale reservation = %d %+v, want 409 not_reserved", code, e)
	}
	second := a.reserve("t", 1)[0]
	if second.Reservation == first.Reservation || second.Attempts != 2 {
		t.Errorf("second reserve = %+v, want a new reservation and 2 attempts", second)
	}
	for _, path := range []string{"finish", "touch", "release", "bury"} {
		code, body := a.do("POST", "/v1/jobs/j/"+path, res)
		if e := errorOf(t, body); code != http.StatusConflict || e.Code != api.CodeNotReserved {
			t.Errorf("%s with the first, stale reservation = %d %+v, want 409 not_reserved", path, code, e)
		}
	}
	code, body = a.do("PATCH", "/v1/jobs/j", `{"priority":1}`)
	if e := errorOf(t, body); code != http.StatusConflict || e.Code != api.CodeNotReserved {
		t.Errorf("PATCH of a reserved job = %d %+v, want 409 not_reserved", code, e)
	}
	a.must(http.StatusOK, "POST", "/v1/jobs/j/bury", `{"reservation":"`+second.Reservation+`"}`, &j)
	if j.State != "buried" {
		t.Errorf("bury = %+v, want buried", j)
	}
	a.must(http.StatusOK, "POST", "/v1/jobs/j/kick", "", &j)
	if j.State != "ready" {
		t.Errorf("kick = %+v, want ready", j)
	}
	third := a.reserve("t", 1)[0]
	a.must(http.StatusOK, "POST", "/v1/jobs/j/finish", `{"reservation":"`+third.Reservation+`"}`, &j)
	if code, _ := a.do("GET", "/v1/jobs/j", ""); code != http.StatusNotFound {
		t.Errorf("GET after finish = %d, want 404", code)
	}
}

func TestReleaseWithDelayAndForceDelete(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("t", `{"id":"j"}`)
	r := a.reserve("t", 1)[0]
	var j api.Job
	a.must(http.StatusOK, "POST", "/v1/jobs/j/release", `{"reservation":"`+r.Reservation+`","delay":"1h"}`, &j)
	if j.State != "delayed" || j.Due.Sub(time.Now()) < 59*time.Minute {
		t.Errorf("release with delay 1h = %+v, want delayed about an hour", j)
	}
	a.put("t", `{"id":"k"}`)
	a.reserve("t", 1)
	a.must(http.StatusOK, "DELETE", "/v1/jobs/k", "", &j)
	if j.State != "reserved" {
		t.Errorf("DELETE of a reserved job = %+v, want it deleted as it was (reserved)", j)
	}
}

func TestUpdate(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("t", `{"id":"j","body":"old","delay":"1h"}`)
	var j api.Job
	a.must(http.StatusOK, "PATCH", "/v1/jobs/j", `{"delay":0,"body":"new","priority":3}`, &j)
	if j.State != "ready" || *j.Body != "new" || j.Priority != 3 {
		t.Errorf("PATCH = %+v, want ready with body new and priority 3", j)
	}
	at := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Millisecond)
	a.must(http.StatusOK, "PATCH", "/v1/jobs/j", `{"at":"`+at.Format(time.RFC3339Nano)+`","body_base64":"/w=="}`, &j)
	if j.State != "delayed" || !j.Due.Equal(at) || j.BodyBase64 == nil || *j.BodyBase64 != "/w==" {
		t.Errorf("PATCH at = %+v, want delayed until %v with body_base64 /w==", j, at)
	}
	code, body := a.do("PATCH", "/v1/jobs/j", `{"delay":1,"at":"2030-01-01T00:00:00Z"}`)
	if e := errorOf(t, body); code != 400 || e.Code != "bad_delay" {
		t.Errorf("PATCH delay and at = %d %+v, want 400 bad_delay", code, e)
	}
	code, body = a.do("PATCH", "/v1/jobs/nope", `{"priority":1}`)
	if e := errorOf(t, body); code != 404 || e.Code != "not_found" {
		t.Errorf("PATCH unknown = %d %+v, want 404 not_found", code, e)
	}
}

func TestKickTopicAndList(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	for _, id := range []string{"a", "b", "c"} {
		a.put("t", `{"id":"`+id+`","delay":"1h"}`)
	}
	a.put("t", `{"id":"r"}`)
	var page api.JobsResponse
	a.must(http.StatusOK, "GET", "/v1/topics/t/jobs?state=delayed&limit=2", "", &page)
	if len(page.Jobs) != 2 || page.Jobs[0].ID != "a" || page.Jobs[1].ID != "b" || page.Next == "" {
		t.Fatalf("first page = %+v, want a, b and a cursor", page)
	}
	a.must(http.StatusOK, "GET", "/v1/topics/t/jobs?state=delayed&limit=2&cursor="+page.Next, "", &page)
	if len(page.Jobs) != 1 || page.Jobs[0].ID != "c" || page.Next != "" {
		t.Fatalf("second page = %+v, want c and no cursor", page)
	}
	a.must(http.StatusOK, "GET", "/v1/topics/t/jobs", "", &page)
	if len(page.Jobs) != 4 {
		t.Errorf("list with default limit = %d jobs, want 4", len(page.Jobs))
	}
	a.must(http.StatusOK, "GET", "/v1/topics/empty/jobs", "", &page)
	if page.Jobs == nil || len(page.Jobs) != 0 {
		t.Errorf("list of an empty topic = %+v, want []", page)
	}
	// A kick retries buried jobs only: with none buried, the delayed
	// jobs stay where they are (beanstalkd's kick would fire them).
	var k api.KickResponse
	a.must(http.StatusOK, "POST", "/v1/topics/t/kick", `{"n":2}`, &k)
	if k != (api.KickResponse{Kicked: 0, State: "buried"}) {
		t.Errorf("kick 2 with none buried = %+v, want 0 buried kicked", k)
	}
	a.must(http.StatusOK, "POST", "/v1/topics/t/kick", `{"n":2,"state":"buried"}`, &k)
	if k != (api.KickResponse{Kicked: 0, State: "buried"}) {
		t.Errorf("kick 2 buried with none buried = %+v, want 0 buried kicked", k)
	}
	code, body := a.do("POST", "/v1/topics/t/kick", `{"n":2,"state":"ready"}`)
	if e := errorOf(t, body); code != 400 || e.Code != "bad_state" {
		t.Errorf("kick of ready jobs = %d %+v, want 400 bad_state", code, e)
	}
	// Firing delayed jobs early is its own, explicit kick.
	a.must(http.StatusOK, "POST", "/v1/topics/t/kick", `{"n":2,"state":"delayed"}`, &k)
	if k != (api.KickResponse{Kicked: 2, State: "delayed"}) {
		t.Errorf("kick 2 delayed = %+v, want 2 delayed kicked", k)
	}
	var tp api.Topic
	a.must(http.StatusOK, "GET", "/v1/topics/t", "", &tp)
	if diff := cmp.Diff(api.Topic{Name: "t", Delayed: 1, Ready: 3}, tp, cmpopts.IgnoreFields(api.Topic{}, "OldestReadyAge")); diff != "" {
		t.Errorf("topic (-want +got):\n%s", diff)
	}
	a.must(http.StatusOK, "GET", "/v1/topics/none", "", &tp)
	if diff := cmp.Diff(api.Topic{Name: "none"}, tp); diff != "" {
		t.Errorf("topic without jobs (-want +got):\n%s", diff)
	}
}
