package httpapi

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store/memstore"
)

// TestFailureReasons: release and bury keep the consumer's reason, TTR
// expiry records "ttr expired", and GET and list show them with the
// job's counters; a bad reason is a named 400 that changes nothing.
func TestFailureReasons(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		e := engine.New(st, engine.Config{Logger: discard()})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		defer func() { cancel(); <-done; _ = st.Close() }()
		a := &testAPI{t: t, e: e, h: NewHandler(e, Options{Logger: discard()})}

		a.put("t", `{"id":"a","body":"x","ttr":"1s"}`)
		var j api.Job
		get := func() api.Job {
			t.Helper()
			a.must(http.StatusOK, "GET", "/v1/jobs/a", "", &j)
			return j
		}

		r := a.reserve("t", 1)[0]
		released := time.Now()
		a.must(http.StatusOK, "POST", "/v1/jobs/a/release", `{"reservation":"`+r.Reservation+`","reason":"upstream said 503 ✗"}`, &j)
		if j.LastReason != "upstream said 503 ✗" || j.Releases != 1 {
			t.Errorf("release answered %+v, want the reason and releases 1", j)
		}
		if g := get(); g.LastReason != "upstream said 503 ✗" || g.LastFailed == nil || !g.LastFailed.Equal(released.Truncate(time.Millisecond)) || g.Releases != 1 {
			t.Errorf("GET after release = %+v, want its reason, last_failed %v, releases 1", g, released)
		}

		r = a.reserve("t", 1)[0]
		long := strings.Repeat("x", delayq.MaxReasonLen+1)
		for _, bad := range []string{`"` + long + `"`, `"bell\u0007"`} {
			status, body := a.do("POST", "/v1/jobs/a/bury", `{"reservation":"`+r.Reservation+`","reason":`+bad+`}`)
			if status != http.StatusBadRequest || errorOf(t, body).Code != delayq.CodeBadReason {
				t.Errorf("bury with reason %.20s… = %d %s, want 400 bad_reason", bad, status, body)
			}
		}
		if g := get(); g.State != "reserved" || g.LastReason != "upstream said 503 ✗" || g.Buries != 0 {
			t.Errorf("a refused bury changed the job: %+v", g)
		}
		a.must(http.StatusOK, "POST", "/v1/jobs/a/bury", `{"reservation":"`+r.Reservation+`","reason":"bad payload"}`, nil)
		if g := get(); g.State != "buried" || g.LastReason != "bad payload" || g.Buries != 1 {
			t.Errorf("GET after bury = %+v, want buried with its reason, buries 1", g)
		}
		var list api.JobsResponse
		a.must(http.StatusOK, "GET", "/v1/topics/t/jobs?state=buried", "", &list)
		if len(list.Jobs) != 1 || list.Jobs[0].LastReason != "bad payload" {
			t.Errorf("list of buried jobs = %+v, want a with its reason", list.Jobs)
		}

		a.must(http.StatusOK, "POST", "/v1/jobs/a/kick", "", nil)
		a.reserve("t", 1)
		time.Sleep(1500 * time.Millisecond) // past the 1 s TTR
		synctest.Wait()
		if g := get(); g.State != "ready" || g.LastReason != delayq.ReasonTTRExpired || g.Timeouts != 1 || g.Kicks != 1 || g.Attempts != 3 {
			t.Errorf("GET after the TTR ran out = %+v, want ready, %q, timeouts 1, kicks 1, attempts 3", g, delayq.ReasonTTRExpired)
		}
	})
}
