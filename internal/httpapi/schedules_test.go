package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/schedule"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// newScheduleAPI serves from memstore with the scheduler running; use it
// inside a synctest bubble.
func newScheduleAPI(t *testing.T) *testAPI {
	t.Helper()
	st := memstore.New()
	a := startAPI(t, st, Options{})
	svc := schedule.New(store.Schedules(st), a.e, schedule.Config{Logger: discard()})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); svc.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	a.h = NewHandler(a.e, Options{Logger: discard(), Schedules: svc})
	return a
}

func TestSchedulesLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScheduleAPI(t)
		start := time.Now()
		var sc api.Schedule
		a.must(http.StatusCreated, "PUT", "/v1/schedules/beat", `{"topic":"pings","every":"1s","body":"ping","ttr":"30s","priority":5}`, &sc)
		if sc.Cron != "@every 1s" || sc.Timezone != "UTC" || sc.Missed != "skip" || sc.TTR != 30 || sc.Priority != 5 || sc.Last != nil || len(sc.Next) != 5 {
			t.Fatalf("created schedule = %+v", sc)
		}
		if !sc.Next[0].Equal(start.Add(time.Second)) || !sc.Next[4].Equal(start.Add(5*time.Second)) {
			t.Fatalf("next = %v, want 1 s .. 5 s after %v", sc.Next, start)
		}
		a.must(http.StatusOK, "PUT", "/v1/schedules/beat", `{"topic":"pings","every":"1s","body":"ping","ttr":"30s","priority":5}`, &sc)

		time.Sleep(3*time.Second + 100*time.Millisecond)
		synctest.Wait()
		jobs := a.reserve("pings", 10)
		if len(jobs) != 3 {
			t.Fatalf("reserved %d jobs after 3 ticks, want 3: %+v", len(jobs), jobs)
		}
		for i, j := range jobs {
			want := schedule.JobID("beat", start.Add(time.Duration(i+1)*time.Second))
			if j.ID != want || *j.Body != "ping" || j.Priority != 5 || j.TTR != 30 {
				t.Errorf("job %d = %+v, want id %s", i, j, want)
			}
		}
		a.must(http.StatusOK, "GET", "/v1/schedules/beat", "", &sc)
		if sc.Last == nil || !sc.Last.Equal(start.Add(3*time.Second)) || !sc.Next[0].Equal(start.Add(4*time.Second)) {
			t.Fatalf("after 3 ticks: last %v next %v", sc.Last, sc.Next)
		}

		a.must(http.StatusOK, "POST", "/v1/schedules/beat/pause", "", &sc)
		if !sc.Paused {
			t.Fatalf("pause answered %+v", sc)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if jobs := a.reserve("pings", 10); len(jobs) != 0 {
			t.Fatalf("a paused schedule fired %d jobs", len(jobs))
		}
		a.must(http.StatusOK, "POST", "/v1/schedules/beat/resume", "", &sc)
		if sc.Paused {
			t.Fatalf("resume answered %+v", sc)
		}

		var list api.SchedulesResponse
		a.must(http.StatusCreated, "PUT", "/v1/schedules/nightly", `{"topic":"reports","cron":"0 30 2 * * *","timezone":"Europe/Berlin","missed":"one","body_base64":"/w=="}`, nil)
		a.must(http.StatusOK, "GET", "/v1/schedules", "", &list)
		if len(list.Schedules) != 2 || list.Schedules[0].Name != "beat" || list.Schedules[1].Name != "nightly" ||
			list.Schedules[1].BodyBase64 == nil || *list.Schedules[1].BodyBase64 != "/w==" {
			t.Fatalf("list = %+v", list)
		}
		a.must(http.StatusNoContent, "DELETE", "/v1/schedules/beat", "", nil)
		_, body := a.do("GET", "/v1/schedules/beat", "")
		if e := errorOf(t, body); e.Code != "not_found" || !strings.Contains(e.Message, "schedule") {
			t.Fatalf("GET deleted = %s", body)
		}
		a.must(http.StatusNotFound, "DELETE", "/v1/schedules/beat", "", nil)
		a.must(http.StatusNotFound, "POST", "/v1/schedules/beat/pause", "", nil)
	})
}

// TestScheduleBadInput: each refusal is a 400 with a named code, and no
// schedule is left behind.
func TestScheduleBadInput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a := newScheduleAPI(t)
		for _, tc := range []struct{ name, body, code string }{
			{"a", `{"topic":"t","cron":"0 0 0 31 2 *"}`, "cron_never_fires"},
			{"a", `{"topic":"t","cron":"0 0 0 30 2 *"}`, "cron_never_fires"},
			{"a", `{"topic":"t","cron":"* * *"}`, "bad_cron"},
			{"a", `{"topic":"t","cron":"@daily","timezone":"Nowhere/Land"}`, "bad_timezone"},
			{"a", `{"topic":"t","every":"-5s"}`, "bad_every"},
			{"a", `{"topic":"t","every":0}`, "bad_every"},
			{"a", `{"topic":"t","every":"1ms"}`, "bad_every"},
			{"a", `{"topic":"t","every":"1s","cron":"@daily"}`, "bad_cron"},
			{"a", `{"topic":"t"}`, "bad_cron"},
			{"a", `{"topic":"t","every":"1s","ttr":"-1s"}`, "bad_ttr"},
			{"a", `{"topic":"t","every":"1s","ttr":0}`, "bad_ttr"},
			{"a", `{"topic":"t","every":"1s","max_attempts":-2}`, "bad_max_attempts"},
			{"a", `{"topic":"t","every":"1s","missed":"never"}`, "bad_missed"},
			{"a", `{"topic":"t","every":"1s","body":"x","body_base64":"eA=="}`, "bad_body"},
			{"a", `{"topic":"","every":"1s"}`, "bad_topic"},
			{"a", `{"topic":"t","every":"soon"}`, "bad_json"},
			{"a", `{"topic":"t","every":"1s","color":"red"}`, "unknown_field"},
			{"a:b", `{"topic":"t","every":"1s"}`, "bad_schedule_name"},
			{"a%20b", `{"topic":"t","every":"1s"}`, "bad_schedule_name"},
		} {
			status, body := a.do("PUT", "/v1/schedules/"+tc.name, tc.body)
			if status != http.StatusBadRequest || errorOf(t, body).Code != tc.code {
				t.Errorf("PUT %s %s = %d %s, want 400 %s", tc.name, tc.body, status, body, tc.code)
			}
		}
		var list api.SchedulesResponse
		a.must(http.StatusOK, "GET", "/v1/schedules", "", &list)
		if len(list.Schedules) != 0 {
			t.Fatalf("refused puts left %+v", list.Schedules)
		}
		status, body := a.do("GET", "/v1/schedules/a:b", "")
		if status != http.StatusBadRequest || errorOf(t, body).Code != "bad_schedule_name" {
			t.Fatalf("GET bad name = %d %s", status, body)
		}
	})
}
