package httpapi

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/store/memstore"
)

// TestDueCounts: GET /v1/topics/{topic}/due over the durable store counts
// a topic's delayed jobs per bound, the next minute, hour and day unless
// the request names its own bounds; bad bounds get bad_within.
func TestDueCounts(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	topic := url.PathEscape("shop/orders")
	for i, delay := range []string{"30s", "10m", "5h", "3d", "0s"} {
		a.put(topic, `{"id":"j`+itoa(i)+`","body":"x","delay":"`+delay+`"}`)
	}
	a.put("other", `{"body":"x","delay":"30s"}`)
	var got api.DueCounts
	a.must(http.StatusOK, "GET", "/v1/topics/"+topic+"/due", "", &got)
	want := []api.DueBucket{{Within: "1m", Seconds: 60, Count: 1}, {Within: "1h", Seconds: 3600, Count: 2}, {Within: "24h", Seconds: 86400, Count: 3}}
	if got.Topic != "shop/orders" || got.At.IsZero() || !cmp.Equal(got.Buckets, want) {
		t.Errorf("GET due = %+v, want topic shop/orders, a time, and buckets %+v", got, want)
	}
	a.must(http.StatusOK, "GET", "/v1/topics/"+topic+"/due?within="+url.QueryEscape("7d, 90s"), "", &got)
	want = []api.DueBucket{{Within: "7d", Seconds: 7 * 86400, Count: 4}, {Within: "90s", Seconds: 90, Count: 1}}
	if !cmp.Equal(got.Buckets, want) {
		t.Errorf("GET due?within=7d,90s buckets = %+v, want %+v", got.Buckets, want)
	}
	a.must(http.StatusOK, "GET", "/v1/topics/nobody/due?within=1h", "", &got)
	if !cmp.Equal(got.Buckets, []api.DueBucket{{Within: "1h", Seconds: 3600}}) {
		t.Errorf("GET due of an unknown topic = %+v, want one zero bucket", got.Buckets)
	}

	for _, tc := range []struct{ path, code string }{
		{"/v1/topics/t/due?within=", engine.CodeBadWithin},
		{"/v1/topics/t/due?within=1m,,1h", engine.CodeBadWithin},
		{"/v1/topics/t/due?within=soon", engine.CodeBadWithin},
		{"/v1/topics/t/due?within=-1m", engine.CodeBadWithin},
		{"/v1/topics/t/due?within=0s", engine.CodeBadWithin},
		{"/v1/topics/t/due?within=101y", engine.CodeBadWithin}, // not a Go unit
		{"/v1/topics/t/due?within=1000000h", engine.CodeBadWithin},
		{"/v1/topics/t/due?within=" + strings.Repeat("1m,", 10) + "1m", engine.CodeBadWithin},
		{"/v1/topics/-bad/due", delayq.CodeBadTopic},
	} {
		status, body := a.do("GET", tc.path, "")
		if status != http.StatusBadRequest || errorOf(t, body).Code != tc.code {
			t.Errorf("GET %s = %d %s, want 400 %s", tc.path, status, body, tc.code)
		}
	}
}

// TestTopicHistory: a fire made by the engine's timer reaches the history
// through the engine's Fired hook, and GET /v1/topics/{topic}/history
// shows the samples with jobs by state, fires and lateness.
func TestTopicHistory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		var e *engine.Engine
		counts := func() map[string]history.Counts { return history.MetricsCounts(e.Metrics()) }
		hist := history.New(history.Config{Topics: st.Topics, Store: st, Counts: counts, Logger: discard()})
		e = engine.New(st, engine.Config{Logger: discard(), Fired: hist.Fired})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		defer func() { cancel(); <-done; _ = st.Close() }()
		a := &testAPI{t: t, e: e, h: NewHandler(e, Options{Logger: discard(), History: hist})}

		var h api.TopicHistory
		a.must(http.StatusOK, "GET", "/v1/topics/t/history", "", &h)
		if h.Sampled || len(h.Samples) != 0 || h.Interval != 10 || h.Span != 3600 || h.MaxTopics != history.DefaultMaxTopics {
			t.Errorf("history before any sample = %+v, want unsampled, no samples, interval 10, span 3600", h)
		}
		a.put("t", `{"id":"soon","body":"x","delay":"2s"}`)
		a.put("t", `{"id":"later","body":"x","delay":"1h"}`)
		a.put("t", `{"id":"now","body":"x"}`)
		time.Sleep(10 * time.Second)
		synctest.Wait() // the timer has fired "soon"
		if err := hist.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.must(http.StatusOK, "GET", "/v1/topics/t/history", "", &h)
		if !h.Sampled || h.SampledTopics != 1 || len(h.Samples) != 1 {
			t.Fatalf("history after one sample = %+v, want one sample", h)
		}
		s := h.Samples[0]
		if s.Ready != 2 || s.Delayed != 1 || s.Fires != 1 || s.FiresPerSec != 0.1 || s.Lateness == nil {
			t.Fatalf("sample = %+v, want 2 ready, 1 delayed, 1 fire at 0.1/s with its lateness", s)
		}
		if s.Lateness.P50 != s.Lateness.Max || s.Lateness.Max < 0 || s.Lateness.Max > 1 {
			t.Errorf("lateness of one fire = %+v, want every figure equal to its max, under a second", *s.Lateness)
		}
		if s.Finishes != 0 || s.Failures != 0 {
			t.Errorf("sample = %+v, want no finishes or failures yet", s)
		}
		// A finish and a release (a failed attempt) in the next interval.
		got := a.reserve("t", 2)
		a.must(http.StatusOK, "POST", "/v1/jobs/"+got[0].ID+"/finish", `{"reservation":"`+got[0].Reservation+`"}`, nil)
		a.must(http.StatusOK, "POST", "/v1/jobs/"+got[1].ID+"/release", `{"reservation":"`+got[1].Reservation+`","delay":"1h"}`, nil)
		time.Sleep(10 * time.Second)
		if err := hist.Sample(context.Background()); err != nil {
			t.Fatal(err)
		}
		a.must(http.StatusOK, "GET", "/v1/topics/t/history", "", &h)
		if len(h.Samples) != 2 || h.Samples[1].Finishes != 1 || h.Samples[1].Failures != 1 || h.Samples[1].FinishesPerSec != 0.1 || h.Samples[1].Delayed != 2 {
			t.Fatalf("history after a finish and a release = %+v, want a second sample with 1 finish, 1 failure, 2 delayed", h.Samples)
		}
		// A week's range: one-minute buckets, the two samples merged.
		a.must(http.StatusOK, "GET", "/v1/topics/t/history?range=7d", "", &h)
		if h.Interval != 60 || h.Span != 7*86400 || len(h.Resolutions) != 2 || len(h.Samples) != 1 ||
			h.Samples[0].Fires != 1 || h.Samples[0].Finishes != 1 || h.Samples[0].Failures != 1 {
			t.Fatalf("history of a week = %+v, want one minute bucket holding both samples", h)
		}
		for _, bad := range []string{"0s", "-1h", "8d", "soon", "1e400h"} {
			status, body := a.do("GET", "/v1/topics/t/history?range="+bad, "")
			if status != http.StatusBadRequest || errorOf(t, body).Code != delayq.CodeBadRange {
				t.Errorf("GET history?range=%s = %d %s, want 400 bad_range", bad, status, body)
			}
		}
		status, body := a.do("GET", "/v1/topics/-bad/history", "")
		if status != http.StatusBadRequest || errorOf(t, body).Code != delayq.CodeBadTopic {
			t.Errorf("GET history of a bad topic name = %d %s, want 400 bad_topic", status, body)
		}
	})
}

// TestTopicHistoryOff: without Options.History the endpoint says so.
func TestTopicHistoryOff(t *testing.T) {
	t.Parallel()
	a := newMemAPI(t, Options{})
	status, body := a.do("GET", "/v1/topics/t/history", "")
	if status != http.StatusNotFound || !strings.Contains(errorOf(t, body).Message, "no history") {
		t.Errorf("GET history without a history = %d %s, want 404 naming it", status, body)
	}
}

// FuzzParseWithin: any query either parses into at most MaxDueBounds
// named durations or is refused with bad_within; it never panics.
func FuzzParseWithin(f *testing.F) {
	for _, s := range []string{"1m,1h,24h", "1d", " 90s , 2h ", "", ",", "1m,,1h", "-1s", "1e9h", "1.5h", strings.Repeat("1s,", 20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		names, bounds, err := parseWithin(s)
		if err != nil {
			if delayq.CodeOf(err) != engine.CodeBadWithin {
				t.Fatalf("parseWithin(%q) = %v, want a bad_within error", s, err)
			}
			return
		}
		if len(names) != len(bounds) || len(bounds) == 0 || len(bounds) > engine.MaxDueBounds {
			t.Fatalf("parseWithin(%q) = %d names, %d bounds", s, len(names), len(bounds))
		}
		for i, n := range names {
			if d, err := delayq.ParseDuration(n); err != nil || d != bounds[i] {
				t.Fatalf("parseWithin(%q): name %q does not parse back to %s", s, n, bounds[i])
			}
		}
	})
}
