package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// hook is a real HTTP receiver of alarm events.
type hook struct {
	*httptest.Server
	events chan api.AlarmEvent
}

func newHook(t *testing.T) *hook {
	t.Helper()
	h := &hook{events: make(chan api.AlarmEvent, 1000)}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev api.AlarmEvent
		if err := json.NewDecoder(r.Body).Decode(&ev); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		h.events <- ev
	}))
	t.Cleanup(h.Close)
	return h
}

func (h *hook) next(t *testing.T, what string) api.AlarmEvent {
	t.Helper()
	select {
	case ev := <-h.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no event within 10s", what)
	}
	return api.AlarmEvent{}
}

// do sends method path with body to s over real HTTP and returns the
// status and body.
func do(t *testing.T, s *Server, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// evaluated waits until s's alarms have finished n more evaluations.
func evaluated(t *testing.T, s *Server, n uint64) {
	t.Helper()
	from := s.alarms.Evaluations()
	waitUntil(t, "alarm evaluations", func() bool { return s.alarms.Evaluations() >= from+n })
}

// buryOne puts a job into topic and buries it through c.
func buryOne(t *testing.T, c *client.Client, topic, id string) {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Put(ctx, topic, client.PutRequest{ID: id, Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	js, err := c.Reserve(ctx, []string{topic}, 1, 5*time.Second)
	if err != nil || len(js) != 1 {
		t.Fatalf("Reserve = %v, %v", js, err)
	}
	if _, err := c.Bury(ctx, id, js[0].Reservation, nil); err != nil {
		t.Fatal(err)
	}
}

// TestAlarmOverHTTPSurvivesRestart: an alarm set over HTTP fires at a
// real receiver, is listed with its state, survives a restart without
// firing again for the same condition, and resolves from the restarted
// server.
func TestAlarmOverHTTPSurvivesRestart(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	h := newHook(t)
	cfg := testConfig(t)
	cfg.AlarmInterval = 100 * time.Millisecond
	s := New(cfg, nil)
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	code, body := do(t, s, "PUT", "/v1/alarms/dead", `{"url":"`+h.URL+`","topics":["orders*"],"when":{"buried_over":0}}`)
	if code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", code, body)
	}
	if code, body := do(t, s, "PUT", "/v1/alarms/dead", `{"url":"`+h.URL+`","topics":["orders*"],"when":{"buried_over":0}}`); code != http.StatusOK {
		t.Fatalf("PUT again = %d %s, want 200", code, body)
	}
	buryOne(t, newClient(t, s), "orders", "o1")
	if ev := h.next(t, "firing"); ev.State != "firing" || ev.Alarm != "dead" || ev.Topic != "orders" || ev.Value != 1 {
		t.Fatalf("event = %+v, want dead firing on orders", ev)
	}
	waitUntil(t, "the sent event counted", func() bool {
		return strings.Contains(scrape(t, s), `delayq_alarm_events_total{outcome="sent"} 1`)
	})
	var a api.Alarm
	getJSON(t, s, "/v1/alarms/dead", &a)
	if a.State != "firing" || len(a.Conditions) != 1 || !a.Conditions[0].Firing || a.Conditions[0].Since == nil {
		t.Errorf("GET /v1/alarms/dead = %+v, want firing on orders", a)
	}
	if err := s.Shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}

	s2 := startServer(t, cfg, &syncBuffer{})
	var list api.AlarmsResponse
	getJSON(t, s2, "/v1/alarms", &list)
	if len(list.Alarms) != 1 || list.Alarms[0].Name != "dead" || list.Alarms[0].State != "firing" || list.Alarms[0].URL != h.URL {
		t.Fatalf("GET /v1/alarms after restart = %+v", list)
	}
	evaluated(t, s2, 3)
	select {
	case ev := <-h.events:
		t.Fatalf("the restarted server announced a condition already announced: %+v", ev)
	default:
	}
	if _, err := newClient(t, s2).KickJob(context.Background(), "o1"); err != nil {
		t.Fatal(err)
	}
	if ev := h.next(t, "resolved"); ev.State != "resolved" || ev.Topic != "orders" {
		t.Fatalf("event = %+v, want resolved", ev)
	}
	if code, _ := do(t, s2, "DELETE", "/v1/alarms/dead", ""); code != http.StatusNoContent {
		t.Errorf("DELETE = %d, want 204", code)
	}
	if code, _ := do(t, s2, "GET", "/v1/alarms/dead", ""); code != http.StatusNotFound {
		t.Errorf("GET after DELETE = %d, want 404", code)
	}
}

// TestAlarmBadInputChangesNothing: a bad definition gets a named 400 and
// leaves the stored alarm as it was.
func TestAlarmBadInputChangesNothing(t *testing.T) {
	defer http.DefaultClient.CloseIdleConnections()
	s := startServer(t, testConfig(t), &syncBuffer{})
	good := `{"url":"http://127.0.0.1:1/hook","when":{"buried_over":5},"repeat":"10m"}`
	if code, body := do(t, s, "PUT", "/v1/alarms/a", good); code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", code, body)
	}
	var before api.Alarm
	getJSON(t, s, "/v1/alarms/a", &before)
	for _, c := range []struct{ body, code string }{
		{`{"url":"file:///etc/passwd","when":{"buried_over":1}}`, "bad_url"},
		{`{"url":"http://h/","when":{"oldest_ready_over":"-5m"}}`, "bad_condition"},
		{`{"url":"http://h/","when":{}}`, "no_condition"},
		{`{"url":"http://h/","when":{"buried_over":1},"repeat":"-1s"}`, "bad_repeat"},
		{`{"url":"http://h/","when":{"buried_over":1},"extra":1}`, "unknown_field"},
		{`{"url":"http://h/","when":{"buried_over":"many"}}`, "bad_json"},
	} {
		code, body := do(t, s, "PUT", "/v1/alarms/a", c.body)
		var e api.ErrorResponse
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || e.Error.Code != c.code {
			t.Errorf("PUT %s = %d %s, want 400 %s", c.body, code, body, c.code)
		}
	}
	if code, _ := do(t, s, "PUT", "/v1/alarms/bad%20name", good); code != http.StatusBadRequest {
		t.Errorf("PUT with a bad name = %d, want 400", code)
	}
	var after api.Alarm
	getJSON(t, s, "/v1/alarms/a", &after)
	if after.URL != before.URL || *after.When.BuriedOver != 5 || !after.Updated.Equal(before.Updated.Time) {
		t.Errorf("bad input changed the alarm: %+v, was %+v", after, before)
	}
	var list api.AlarmsResponse
	getJSON(t, s, "/v1/alarms", &list)
	if len(list.Alarms) != 1 {
		t.Errorf("GET /v1/alarms = %d alarms, want 1", len(list.Alarms))
	}
}

// TestAlarmSentOnceOverRedis: two instances over one Redis evaluate the
// same alarm; every event (the firing, each repeat, the resolution)
// reaches the receiver once.
func TestAlarmSentOnceOverRedis(t *testing.T) {
	url := redisURL(t)
	defer http.DefaultClient.CloseIdleConnections()
	h := newHook(t)
	start := func() *Server {
		cfg := testConfig(t)
		cfg.Redis, cfg.DataDir = url, ""
		cfg.AlarmInterval = 100 * time.Millisecond
		s := New(cfg, nil)
		if err := s.Start(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Shutdown(context.Background()) })
		return s
	}
	a, b := start(), start()
	suffix := time.Now().Format("150405.000000")
	topic, name := "alarm-redis-"+suffix, "once-"+strings.ReplaceAll(suffix, ".", "-")
	if code, body := do(t, a, "PUT", "/v1/alarms/"+name, `{"url":"`+h.URL+`","topics":["`+topic+`"],"when":{"buried_over":0},"repeat":"1s"}`); code != http.StatusCreated {
		t.Fatalf("PUT = %d %s", code, body)
	}
	t.Cleanup(func() { do(t, a, "DELETE", "/v1/alarms/"+name, "") })
	job := "j-" + name // unique: the Redis database outlives one test run
	buryOne(t, newClient(t, b), topic, job)
	var firing []api.AlarmEvent
	for len(firing) < 4 { // the first and three repeats
		ev := h.next(t, "firing")
		if ev.State != "firing" || ev.Topic != topic {
			t.Fatalf("event = %+v, want firing on %s", ev, topic)
		}
		firing = append(firing, ev)
	}
	for i := 1; i < len(firing); i++ {
		if gap := firing[i].At.Sub(firing[i-1].At.Time); gap < time.Second {
			t.Errorf("events %d and %d are %s apart, under the 1s repeat: sent twice", i-1, i, gap)
		}
		if !firing[i].Since.Equal(firing[0].Since.Time) {
			t.Errorf("repeat %d has since %s, want %s", i, firing[i].Since, firing[0].Since)
		}
	}
	if _, err := newClient(t, a).KickJob(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	for {
		ev := h.next(t, "resolved")
		if ev.State == "resolved" {
			break
		}
	}
	evaluated(t, a, 5)
	evaluated(t, b, 5)
	// Redis round trips are timed as commits (store.CommitObserver).
	if text := scrape(t, b); !strings.Contains(text, "delayq_store_commit_seconds_count") || strings.Contains(text, "delayq_store_commit_seconds_count 0\n") {
		t.Error("delayq_store_commit_seconds counted no Redis write on the instance that buried a job")
	}
	select {
	case ev := <-h.events:
		t.Errorf("event after the resolution: %+v", ev)
	default:
	}
}
