package httpapi

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
)

// Bodies encoding/json took and the server should not have: null made a
// job of all defaults, a key in the wrong case set the field it folds to,
// and of a key given twice the last silently won. Each is refused with a
// named code, and nothing is stored.
func TestStrictDecoding(t *testing.T) {
	a := newMemAPI(t, Options{})
	for _, c := range []struct{ method, path, body, code string }{
		{"POST", "/v1/topics/t/jobs", `null`, delayq.CodeBadJSON},
		{"POST", "/v1/topics/t/jobs", ` null `, delayq.CodeBadJSON},
		{"POST", "/v1/topics/t/jobs", `{"BODY":"x"}`, delayq.CodeUnknownField},
		{"POST", "/v1/topics/t/jobs", `{"body":"x","Delay":"1h"}`, delayq.CodeUnknownField},
		{"POST", "/v1/topics/t/jobs", `{"body":"x","body":"y"}`, delayq.CodeDuplicateField},
		{"POST", "/v1/topics/t/jobs", `{"delay":"1s","body":"x","delay":"1h"}`, delayq.CodeDuplicateField},
		{"POST", "/v1/topics/t/jobs", `{"body":"x","b\u006fdy":"y"}`, delayq.CodeDuplicateField},
		{"POST", "/v1/topics/t/jobs", `{"body":"x","nope":1}`, delayq.CodeUnknownField},
		{"POST", "/v1/topics/t/jobs/batch", `null`, delayq.CodeBadJSON},
		{"POST", "/v1/topics/t/jobs/batch", `{"JOBS":[{"body":"x"}]}`, delayq.CodeUnknownField},
		{"POST", "/v1/topics/t/jobs/batch", `{"jobs":[],"jobs":[{"body":"x"}]}`, delayq.CodeDuplicateField},
		{"POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"body":"x"},null]}`, delayq.CodeBadJSON},
		{"POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"body":"x","Body":"y"}]}`, delayq.CodeUnknownField},
		{"POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"body":"x","body":"y"}]}`, delayq.CodeDuplicateField},
		{"PUT", "/v1/topics/t/policy", `{"backoff":{"initial":"1s","Initial":"2s"}}`, delayq.CodeUnknownField},
		{"PUT", "/v1/topics/t/policy", `{"ttr":"1s","ttr":"2s"}`, delayq.CodeDuplicateField},
		{"PUT", "/v1/topics/t/policy", `null`, delayq.CodeBadJSON},
		{"POST", "/v1/reserve", `{"topics":["t"],"TOPICS":["u"]}`, delayq.CodeUnknownField},
		{"POST", "/v1/reserve", `{"topics":["t"],"topics":["u"]}`, delayq.CodeDuplicateField},
		{"POST", "/v1/reserve", `null`, delayq.CodeBadJSON},
		{"POST", "/v1/jobs/finish", `{"jobs":[{"id":"a","reservation":"r","reservation":"s"}]}`, delayq.CodeDuplicateField},
	} {
		status, body := a.do(c.method, c.path, c.body)
		if status != http.StatusBadRequest || errorOf(t, body).Code != c.code {
			t.Errorf("%s %s %s = %d %s, want 400 %s", c.method, c.path, c.body, status, body, c.code)
		}
	}
	if topics, err := a.e.Topics(t.Context()); err != nil || len(topics) != 0 {
		t.Fatalf("refused requests stored something: %v, %v", topics, err)
	}
	if _, err := a.e.GetPolicy(t.Context(), "t"); err == nil {
		t.Fatal("a refused policy was stored")
	}
	// What is right still goes through, escapes and all.
	a.must(http.StatusCreated, "POST", "/v1/topics/t/jobs", `{"b\u006fdy":"x","id":"j1","delay":"0s"}`, nil)
	a.must(http.StatusCreated, "POST", "/v1/topics/t/jobs/batch", `{"jobs":[{"body":"{\"body\":1,\"body\":2}"}]}`, nil)
	status, body := a.do("POST", "/v1/topics/t/jobs", `{"BODY":"x"}`)
	if msg := errorOf(t, body).Message; status != 400 || !strings.Contains(msg, `"body"`) {
		t.Errorf("the wrong-case answer does not name the field: %s", msg)
	}
}

// A malformed chunk of chunked transfer encoding used to answer 500
// internal (and log an error): it is the client's mistake, 400.
func TestMalformedChunkIs400(t *testing.T) {
	a := newMemAPI(t, Options{})
	srv := httptest.NewServer(a.h)
	t.Cleanup(srv.Close)
	for _, c := range []struct{ path, chunked string }{
		{"/v1/topics/t/jobs", "zz\r\n{\"body\":\"x\"}\r\n0\r\n\r\n"},
		{"/v1/topics/t/jobs", "5\r\n{\"bod\r\n-1\r\n"},
		{"/v1/topics/t/jobs/batch", "9\r\n{\"jobs\":[\r\nq\r\n"},
		{"/v1/reserve", "ffffffffffffffffffff\r\n"},
	} {
		nc, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer nc.Close()
		nc.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(nc, "POST "+c.path+" HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n"+c.chunked)
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatalf("%s %q: %v", c.path, c.chunked, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e api.ErrorResponse
		json.Unmarshal(b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Code != delayq.CodeMalformedBody {
			t.Errorf("%s %q = %d %s, want 400 malformed_body", c.path, c.chunked, resp.StatusCode, b)
		}
	}
	if topics, _ := a.e.Topics(t.Context()); len(topics) != 0 {
		t.Fatalf("a malformed request stored a job: %v", topics)
	}
}

// FuzzStrictDecode: a put body is accepted only when an independent walk
// with encoding/json's tokenizer finds an object, no key twice in any
// object, and only PutRequest's exact field names at the top; and the
// walker never panics or spins on any input, JSON or not.
func FuzzStrictDecode(f *testing.F) {
	for _, s := range []string{
		`{"body":"x"}`, `null`, `{"BODY":"x"}`, `{"body":"x","body":"y"}`,
		`{"body":"x","delay":1.5e3,"ttr":"1s","priority":1,"max_attempts":2,"id":"a","at":"2030-01-01T00:00:00Z"}`,
		`{"b\u006fdy":"x"}`, `{"body":"\"body\":1"}`, `{"body":"x\\"}`, `[1,{"a":1,"a":2}]`, `{"body":{"a":1}}`, `{`, `"`, `[[[`, `{"a"`,
	} {
		f.Add([]byte(s))
	}
	fields := map[string]bool{}
	for name := range shapeOf(reflect.TypeFor[*api.PutRequest]()).fields {
		fields[name] = true
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = checkStrict(b, &api.PutRequest{}) // must return on anything
		var req api.PutRequest
		if decodeBytes(b, &req) != nil {
			return
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		if tok, _ := dec.Token(); tok != json.Delim('{') {
			t.Fatalf("accepted %q, which is not an object", b)
		}
		var walk func(depth int, top bool)
		walk = func(depth int, top bool) { // after a '{'
			seen := map[string]bool{}
			for dec.More() {
				tok, err := dec.Token()
				if err != nil {
					t.Fatal(err)
				}
				key := tok.(string)
				if seen[key] {
					t.Fatalf("accepted %q with %q twice", b, key)
				}
				seen[key] = true
				if top && !fields[key] {
					t.Fatalf("accepted %q with the field %q", b, key)
				}
				skipValue(t, dec, walk, depth)
			}
			dec.Token() // '}'
		}
		walk(0, true)
	})
}

func skipValue(t *testing.T, dec *json.Decoder, walk func(int, bool), depth int) {
	tok, err := dec.Token()
	if err != nil {
		t.Fatal(err)
	}
	switch tok {
	case json.Delim('{'):
		walk(depth+1, false)
	case json.Delim('['):
		for dec.More() {
			skipValue(t, dec, walk, depth+1)
		}
		dec.Token() // ']'
	}
}
