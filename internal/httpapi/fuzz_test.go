package httpapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// serve sends one request straight to h.
func serve(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(method, path, strings.NewReader(body)))
	return w
}

// FuzzPutRequest: whatever the body of a put, the server never panics and
// answers 201 with an id or a 4xx error object with a code; a stored job
// reads back with the body the request gave.
func FuzzPutRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","body":"x","delay":"1500ms","ttr":5,"priority":1,"max_attempts":2}`,
		`{"body_base64":"/wAB","at":"2030-01-01T00:00:00.123Z"}`,
		`{"delay":1e308}`, `{"ttr":"-1s"}`, `{"at":"0001-01-01T00:00:00Z"}`, `{"body":"\ud800"}`,
		`{"body":"x","body_base64":"eA=="}`, `{} {}`, `null`, `[]`, `{"max_attempts":-1}`,
		"{\"body\":\"a\xffb\"}", `{"body":"\ud83d\ude00"}`, `{"body":"\udc00\ud800"}`,
		`{"delay":9223372036.854775807}`, `{"delay":"7d"}`, `{"at":"1969-12-31T23:59:59Z"}`,
	} {
		f.Add(s)
	}
	a := newMemAPI(f, Options{})
	f.Fuzz(func(t *testing.T, body string) {
		w := serve(a.h, "POST", "/v1/topics/fuzz/jobs", body)
		if w.Code != http.StatusCreated {
			var e api.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code < 400 || w.Code >= 500 || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("put %q = %d %s, want 201 or a 4xx error object", body, w.Code, w.Body)
			}
			return
		}
		var p api.PutResponse
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.ID == "" || p.Seq == 0 {
			t.Fatalf("put %q = %s, want an id and a seq", body, w.Body)
		}
		checkStoredBody(t, a, body, p.ID)
	})
}

// checkStoredBody deletes the job put by req (keeping the store small) and
// compares its body with the one req gave.
func checkStoredBody(t *testing.T, a *testAPI, req, id string) {
	t.Helper()
	w := serve(a.h, "DELETE", "/v1/jobs/"+id, "")
	var j api.Job
	if err := json.Unmarshal(w.Body.Bytes(), &j); err != nil || w.Code != http.StatusOK {
		t.Fatalf("DELETE %s = %d %s", id, w.Code, w.Body)
	}
	var in api.PutRequest
	_ = json.Unmarshal([]byte(req), &in)
	if in.Body != nil && (j.Body == nil || *j.Body != *in.Body) {
		t.Fatalf("put %q stored body %v, want %q", req, j.Body, *in.Body)
	}
}

// FuzzFinishBatch: whatever the body of a batch finish, the server never
// panics, and answers 200 with one result per entry (each ok or with an
// error object), or a 4xx error object.
func FuzzFinishBatch(f *testing.F) {
	for _, s := range []string{
		`{"jobs":[{"id":"a","reservation":"1-1"},{"id":"b","reservation":""}]}`,
		`{"jobs":[]}`, `{}`, `{"jobs":[{}]}`, `{"jobs":null}`, `{"jobs":[{"id":"a b","reservation":"x"}]}`,
		`{"jobs":[{"id":"a","reservation":"1-1","x":1}]}`, `[`, ``,
	} {
		f.Add(s)
	}
	a := newMemAPI(f, Options{})
	f.Fuzz(func(t *testing.T, body string) {
		w := serve(a.h, "POST", "/v1/jobs/finish", body)
		if w.Code != http.StatusOK {
			var e api.ErrorResponse
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code < 400 || w.Code >= 500 || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("finish %q = %d %s, want 200 or a 4xx error object", body, w.Code, w.Body)
			}
			return
		}
		var in api.FinishBatchRequest
		var out api.FinishBatchResponse
		if err := json.Unmarshal([]byte(body), &in); err != nil {
			t.Fatalf("finish %q answered 200 but is not a request: %v", body, err)
		}
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || len(out.Results) != len(in.Jobs) {
			t.Fatalf("finish %q = %s, want %d results", body, w.Body, len(in.Jobs))
		}
		for _, r := range out.Results {
			if r.OK == (r.Error != nil) || r.Error != nil && (r.Error.Code == "" || r.Error.Message == "") {
				t.Fatalf("finish %q: result %+v is neither ok nor an error object", body, r)
			}
		}
	})
}

// FuzzCommand: whatever the body of an original-protocol request, the
// server never panics, answers 200 (JSON), 400 (not JSON) or 413, always
// with the four fields, and a failure always says why.
func FuzzCommand(f *testing.F) {
	for _, s := range []string{
		`{"command":"add","topic":"orderclose","id":"orderclose-42","delay":1800,"TTR":60,"body":"..."}`,
		`{"command":"add","topic":"t","body":{"a":[1,2,{"b":null}]}}`,
		`{"command":"pop","topic":"orderclose"}`, `{"command":"pop","topic":"t","timeout":0}`,
		`{"command":"finish","id":"orderclose-42"}`, `{"command":"delete","id":"x"}`,
		`{"command":"add","topic":"t","delay":NaN}`, `{"command":"add","TTR":-0}`, `"add"`, `{`, ``,
	} {
		f.Add(s)
	}
	a := newMemAPI(f, Options{})
	f.Fuzz(func(t *testing.T, body string) {
		w := serve(a.h, "POST", "/", body)
		var r api.CommandResponse
		if err := json.Unmarshal(w.Body.Bytes(), &r); err != nil {
			t.Fatalf("command %q = %d %s: not an answer: %v", body, w.Code, w.Body, err)
		}
		for _, field := range []string{`"success":`, `"error":`, `"id":`, `"value":`} {
			if !strings.Contains(w.Body.String(), field) {
				t.Fatalf("command %q = %s, lacks %s", body, w.Body, field)
			}
		}
		switch {
		case w.Code != http.StatusOK && (r.Success || r.Error == "" || (w.Code != http.StatusBadRequest && w.Code != http.StatusRequestEntityTooLarge)):
			t.Fatalf("command %q = %d %+v, want 200, or 400/413 with an error", body, w.Code, r)
		case w.Code == http.StatusOK && !r.Success && r.Error == "":
			t.Fatalf("command %q = %+v: a failure must say why", body, r)
		case r.Success && r.ID != "":
			serve(a.h, "DELETE", "/v1/jobs/"+r.ID, "") // keep the store small
		}
	})
}

// FuzzPolicy: the policy parser answers a policy or a named validation
// error, never panics, and what it accepts survives the round trip
// through its own answer (GET shows what PUT will take again).
func FuzzPolicy(f *testing.F) {
	for _, s := range []string{
		`{"ttr":"30s","max_attempts":3,"backoff":{"initial":"1s","max":"10m","factor":2,"jitter":0.1},"max_jobs":100}`,
		`{"backoff":{"initial":1.5}}`, `{"backoff":{"initial":"1s","factor":1e308}}`, `{"backoff":{"initial":"1s","jitter":NaN}}`,
		`{}`, `null`, `{"ttr":0}`, `{"max_jobs":-1}`, `{"backoff":null}`, `{"x":1}`, `{"ttr":"9999999h"}`,
		`{"backoff":{"initial":"1ms","max":"8760h"}}`, `{"backoff":{"initial":"0.5ms"}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		p, err := parsePolicy([]byte(body))
		if err != nil {
			var ve *delayq.ValidationError
			if !errors.As(err, &ve) || ve.Code == "" {
				t.Fatalf("parsePolicy(%q) = %v, want a named validation error", body, err)
			}
			return
		}
		wire, err := json.Marshal(toPolicy("t", p))
		if err != nil {
			t.Fatal(err)
		}
		var back map[string]any
		_ = json.Unmarshal(wire, &back)
		delete(back, "topic")
		again, _ := json.Marshal(back)
		p2, err := parsePolicy(again)
		if err != nil {
			t.Fatalf("parsePolicy(%q) accepted, but its answer %s is refused: %v", body, again, err)
		}
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("parsePolicy(%q) = %+v, but its answer %s parses as %+v", body, p, again, p2)
		}
	})
}
