package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq/api"
)

// cmd sends one original-protocol command to path and returns the answer.
func (a *testAPI) cmd(path, body string, wantStatus int) api.CommandResponse {
	a.t.Helper()
	var r api.CommandResponse
	a.must(wantStatus, "POST", path, body, &r)
	return r
}

// TestCommandLifecycle is the article's story: an order-close job put with
// a 30-minute delay and a 60 s TTR is not poppable before its due time,
// pops after it, is popped again when its consumer does not finish within
// the TTR, and is gone once finished.
func TestCommandLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMemAPI(t, Options{})
		ok := func(id, value string) api.CommandResponse {
			return api.CommandResponse{Success: true, ID: id, Value: value}
		}
		add := `{"command":"add","topic":"orderclose","id":"orderclose-42","delay":1800,"TTR":60,"body":"{\"order\":42}"}`
		pop := `{"command":"pop","topic":"orderclose"}`
		steps := []struct {
			sleep time.Duration
			req   string
			want  api.CommandResponse
		}{
			{0, add, ok("orderclose-42", "")},
			{0, pop, ok("", "")},
			{1799 * time.Second, pop, ok("", "")},
			{time.Second, pop, ok("orderclose-42", `{"order":42}`)},
			{59 * time.Second, pop, ok("", "")},                     // TTR still running
			{time.Second, pop, ok("orderclose-42", `{"order":42}`)}, // TTR ran out: handed out again
			{0, `{"command":"finish","id":"orderclose-42"}`, ok("orderclose-42", "")},
			{2 * time.Minute, pop, ok("", "")},
			{0, `{"command":"finish","id":"orderclose-42"}`, api.CommandResponse{}}, // gone
		}
		for i, s := range steps {
			time.Sleep(s.sleep)
			synctest.Wait() // let the timer act on the new time
			got := a.cmd("/", s.req, http.StatusOK)
			if !s.want.Success {
				if got.Success || !strings.Contains(got.Error, "not found") {
					t.Errorf("step %d %s = %+v, want failure: not found", i, s.req, got)
				}
				continue
			}
			if diff := cmp.Diff(s.want, got); diff != "" {
				t.Errorf("step %d %s (-want +got):\n%s", i, s.req, diff)
			}
		}
		if code, _ := a.do("GET", "/v1/jobs/orderclose-42", ""); code != http.StatusNotFound {
			t.Errorf("GET finished job = %d, want 404", code)
		}
	})
}

func TestCommandPopTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newMemAPI(t, Options{})
		a.cmd("/v1/command", `{"command":"add","topic":"t","id":"j","delay":5,"body":"x"}`, http.StatusOK)
		start := time.Now()
		got := a.cmd("/v1/command", `{"command":"pop","topic":"t","timeout":30}`, http.StatusOK)
		if !got.Success || got.ID != "j" || got.Value != "x" || time.Since(start) != 5*time.Second {
			t.Errorf("pop with timeout = %+v after %v, want j after exactly 5s", got, time.Since(start))
		}
		start = time.Now()
		got = a.cmd("/v1/command", `{"command":"pop","topic":"t","timeout":2.5}`, http.StatusOK)
		if !got.Success || got.ID != "" || time.Since(start) != 2500*time.Millisecond {
			t.Errorf("pop of an empty topic = %+v after %v, want empty success after 2.5s", got, time.Since(start))
		}
	})
}

func TestCommandAdd(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	tests := []struct {
		name, req string
		wantBody  string
		wantTTR   float64
	}{
		{"string body", `{"command":"add","topic":"t","id":"s","body":"plain"}`, "plain", 60},
		{"object body", `{"command":"add","topic":"t","id":"o","body": {"a": [1, 2]},"TTR":5}`, `{"a":[1,2]}`, 5},
		{"number body", `{"command":"add","topic":"t","id":"n","body":42}`, `42`, 60},
		{"no body", `{"command":"add","topic":"t","id":"e"}`, ``, 60},
		{"lower-case ttr", `{"command":"ADD","topic":"t","id":"l","ttr":7}`, ``, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := a.cmd("/", tt.req, http.StatusOK)
			if !got.Success || got.Error != "" {
				t.Fatalf("%s = %+v, want success", tt.req, got)
			}
			var j api.Job
			a.must(http.StatusOK, "GET", "/v1/jobs/"+got.ID, "", &j)
			if *j.Body != tt.wantBody || j.TTR != tt.wantTTR {
				t.Errorf("stored job = body %q ttr %v, want body %q ttr %v", *j.Body, j.TTR, tt.wantBody, tt.wantTTR)
			}
		})
	}
	got := a.cmd("/", `{"command":"add","topic":"t","body":"x"}`, http.StatusOK)
	if !got.Success || got.ID == "" {
		t.Errorf("add without id = %+v, want success with a generated id", got)
	}
}

func TestCommandErrors(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.cmd("/", `{"command":"add","topic":"t","id":"live"}`, http.StatusOK)
	tests := []struct {
		name, req string
		status    int
		mention   string
	}{
		{"not json", `command=add`, http.StatusBadRequest, "not JSON"},
		{"empty", ``, http.StatusBadRequest, "not JSON"},
		{"unknown command", `{"command":"push","topic":"t"}`, 200, `unknown command "push"`},
		{"no command", `{"topic":"t"}`, 200, "unknown command"},
		{"not an object", `[1,2]`, 200, "JSON object"},
		{"duplicate id", `{"command":"add","topic":"t","id":"live"}`, 200, "already exists"},
		{"bad topic", `{"command":"add","topic":"a b","id":"x"}`, 200, "not a valid topic"},
		{"bad id", `{"command":"add","topic":"t","id":"a b"}`, 200, "not a valid job id"},
		{"negative delay", `{"command":"add","topic":"t","delay":-1}`, 200, "negative"},
		{"huge delay", `{"command":"add","topic":"t","delay":1e300}`, 200, "out of range"},
		{"delay just past a duration", `{"command":"add","topic":"t","delay":9223372036.854775807}`, 200, "out of range"},
		{"ttr zero", `{"command":"add","topic":"t","TTR":0}`, 200, "minimum"},
		{"delay as string", `{"command":"add","topic":"t","delay":"10"}`, 200, "delay"},
		{"body too big", `{"command":"add","topic":"t","body":"` + strings.Repeat("x", 65536) + `"}`, 200, "65536 bytes"},
		{"pop bad topic", `{"command":"pop","topic":""}`, 200, "not a valid topic"},
		{"pop timeout over max", `{"command":"pop","topic":"t","timeout":301}`, 200, "maximum"},
		{"finish unknown", `{"command":"finish","id":"nope"}`, 200, "not found"},
		{"delete unknown", `{"command":"delete","id":"nope"}`, 200, "not found"},
		{"finish without id", `{"command":"finish"}`, 200, "not a valid job id"},
		{"too large", `{"command":"add","topic":"t","body":"` + strings.Repeat("x", 1<<20) + `"}`, http.StatusRequestEntityTooLarge, "too large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := a.do("POST", "/", tt.req)
			var got api.CommandResponse
			if err := json.Unmarshal([]byte(body), &got); err != nil {
				t.Fatalf("answer %s: %v", body, err)
			}
			if code != tt.status || got.Success || !strings.Contains(got.Error, tt.mention) {
				t.Errorf("%s = %d %+v, want %d, success false and an error naming %q", tt.req, code, got, tt.status, tt.mention)
			}
			for _, field := range []string{`"success":false`, `"error":`, `"id":""`, `"value":""`} {
				if !strings.Contains(body, field) {
					t.Errorf("answer %s lacks %s: every answer has all four fields", body, field)
				}
			}
		})
	}
}

// TestCommandFinishReserved: the original finish and delete work by id
// alone, whoever holds the job.
func TestCommandFinishReserved(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	a.put("t", `{"id":"a"}`)
	a.put("t", `{"id":"b","delay":"1h"}`)
	a.reserve("t", 1)
	for _, c := range []string{`{"command":"finish","id":"a"}`, `{"command":"delete","id":"b"}`} {
		if got := a.cmd("/", c, http.StatusOK); !got.Success {
			t.Errorf("%s = %+v, want success", c, got)
		}
	}
	var tp api.TopicsResponse
	a.must(http.StatusOK, "GET", "/v1/topics", "", &tp)
	if len(tp.Topics) != 0 {
		t.Errorf("topics after finish and delete = %+v, want none", tp.Topics)
	}
}

// TestCommandReadsKeysAsEncodingJSON pins what http.md says of the
// original protocol, which is not read strictly as the v1 API is: its
// clients were written for another server, so a key matches its field in
// any case (`ttr` for `TTR`) and of a key given twice the last wins; a
// body of null is no command and stores nothing.
func TestCommandReadsKeysAsEncodingJSON(t *testing.T) {
	a := newMemAPI(t, Options{})
	if got := a.cmd("/", `null`, http.StatusOK); got.Success || !strings.Contains(got.Error, "unknown command") {
		t.Errorf("null = %+v, want unknown command", got)
	}
	if topics, err := a.e.Topics(t.Context()); err != nil || len(topics) != 0 {
		t.Fatalf("null stored something: %v, %v", topics, err)
	}
	if got := a.cmd("/", `{"command":"add","topic":"t","id":"a","ttr":30,"Body":"first","body":"last"}`, http.StatusOK); !got.Success {
		t.Fatalf("add with ttr in lower case and body given twice = %+v", got)
	}
	j := a.getJob("a")
	if j.TTR != 30 || j.Body == nil || *j.Body != "last" {
		t.Errorf("job = ttr %v body %v, want 30s and the last body given", j.TTR, j.Body)
	}
}
