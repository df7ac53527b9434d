package server

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// families scrapes s's /metrics and parses it with Prometheus's own text
// parser.
func families(t *testing.T, s *Server) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := p.TextToMetricFamilies(strings.NewReader(scrape(t, s)))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fs
}

// value is the value of family name's series with exactly labels (counter,
// or a histogram's sample count); found reports whether it exists.
func value(fs map[string]*dto.MetricFamily, name string, labels map[string]string) (v float64, found bool) {
	f := fs[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue(), true
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount()), true
		}
	}
	return 0, false
}

// TestCountersCountJobs drives a real server through a known sequence of
// batch calls and reads every job counter back from /metrics: counters
// count jobs, not calls (a batch put of 10 and a reserve of 10 used to
// count 1 each, while a batch finish of 10 counted 10), the per-topic
// put, finish and failure counters add up, and request durations are
// labelled by route pattern, with unknown routes and methods collapsed.
func TestCountersCountJobs(t *testing.T) {
	s := startServer(t, testConfig(t), &syncBuffer{})
	hc := plainClient(t)
	u := s.URL()
	must := func(want int, method, path, body string) string {
		t.Helper()
		code, b := tokenCall(t, hc, method, u+path, "", body)
		if code != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	// A batch of 10 into mail: m9 may be reserved once and expires in 1s.
	var batch []string
	for i := range 9 {
		batch = append(batch, fmt.Sprintf(`{"id":"m%d","body":"x"}`, i))
	}
	batch = append(batch, `{"id":"m9","body":"x","ttr":"1s","max_attempts":1}`)
	must(201, "POST", "/v1/topics/mail/jobs/batch", `{"jobs":[`+strings.Join(batch, ",")+`]}`)
	must(201, "POST", "/v1/topics/sms/jobs", `{"id":"s1","body":"x","ttr":"1s"}`)
	// A refused batch (a bad id) counts 1, under its code, and stores nothing.
	must(400, "POST", "/v1/topics/mail/jobs/batch", `{"jobs":[{"id":"ok1"},{"id":"bad id"},{"id":"ok2"}]}`)

	var res struct {
		Jobs []struct{ ID, Reservation string }
	}
	json.Unmarshal([]byte(must(200, "POST", "/v1/reserve", `{"topics":["mail"],"n":10}`)), &res)
	if len(res.Jobs) != 10 {
		t.Fatalf("reserve n=10 = %d jobs", len(res.Jobs))
	}
	held := map[string]string{}
	for _, j := range res.Jobs {
		held[j.ID] = j.Reservation
	}
	json.Unmarshal([]byte(must(200, "POST", "/v1/reserve", `{"topics":["sms"]}`)), &res)
	if len(res.Jobs) != 1 {
		t.Fatalf("reserve sms = %d jobs", len(res.Jobs))
	}
	// Finish 7 in one batch, plus one entry for a job that does not exist.
	var fin []string
	for i := range 7 {
		id := fmt.Sprintf("m%d", i)
		fin = append(fin, fmt.Sprintf(`{"id":%q,"reservation":%q}`, id, held[id]))
	}
	fin = append(fin, `{"id":"nosuch","reservation":"r"}`)
	must(200, "POST", "/v1/jobs/finish", `{"jobs":[`+strings.Join(fin, ",")+`]}`)
	must(200, "POST", "/v1/jobs/m7/release", fmt.Sprintf(`{"reservation":%q,"delay":"1h"}`, held["m7"]))
	must(200, "POST", "/v1/jobs/m8/bury", fmt.Sprintf(`{"reservation":%q}`, held["m8"]))
	must(404, "GET", "/no/such/route", "")
	must(405, "BREW", "/v1/topics", "")

	// m9 (max_attempts 1) and s1 run out of TTR: the server buries m9
	// (attempts spent) and hands s1 out again.
	var fs map[string]*dto.MetricFamily
	waitUntil(t, "both TTR expiries counted", func() bool {
		fs = families(t, s)
		a, _ := value(fs, "delayq_jobs_failed_total", map[string]string{"topic": "mail", "reason_class": "attempts_exhausted"})
		b, _ := value(fs, "delayq_ttr_expired_total", map[string]string{"topic": "sms"})
		return a == 1 && b == 1
	})
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"delayq_operations_total", map[string]string{"op": "put", "result": "ok"}, 11},
		{"delayq_operations_total", map[string]string{"op": "put", "result": "bad_id"}, 1},
		{"delayq_operations_total", map[string]string{"op": "reserve", "result": "ok"}, 11},
		{"delayq_operations_total", map[string]string{"op": "finish", "result": "ok"}, 7},
		{"delayq_operations_total", map[string]string{"op": "finish", "result": "not_found"}, 1},
		{"delayq_operations_total", map[string]string{"op": "release", "result": "ok"}, 1},
		{"delayq_operations_total", map[string]string{"op": "bury", "result": "ok"}, 1},
		{"delayq_jobs_put_total", map[string]string{"topic": "mail"}, 10},
		{"delayq_jobs_put_total", map[string]string{"topic": "sms"}, 1},
		{"delayq_jobs_finished_total", map[string]string{"topic": "mail"}, 7},
		{"delayq_jobs_failed_total", map[string]string{"topic": "mail", "reason_class": "buried"}, 1},
		{"delayq_jobs_failed_total", map[string]string{"topic": "mail", "reason_class": "attempts_exhausted"}, 1},
		{"delayq_releases_total", map[string]string{"topic": "mail"}, 1},
		{"delayq_ttr_expired_total", map[string]string{"topic": "sms"}, 1},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "/v1/topics/{topic}/jobs/batch", "method": "POST", "code": "201"}, 1},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "/v1/topics/{topic}/jobs/batch", "method": "POST", "code": "400"}, 1},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "/v1/reserve", "method": "POST", "code": "200"}, 2},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "/v1/jobs/finish", "method": "POST", "code": "200"}, 1},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "/v1/jobs/{id}/release", "method": "POST", "code": "200"}, 1},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "unmatched", "method": "GET", "code": "404"}, 1},
		{"delayq_http_request_duration_seconds", map[string]string{"route": "unmatched", "method": "other", "code": "405"}, 1},
	} {
		if got, ok := value(fs, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// delayq_jobs_failed_total counts jobs that failed (became buried),
	// not attempts that will be retried: m7's release and s1's expiry
	// left attempts, so neither job failed (docs/states.md).
	for _, class := range []string{"released", "ttr_expired"} {
		for _, topic := range []string{"mail", "sms"} {
			if got, ok := value(fs, "delayq_jobs_failed_total", map[string]string{"topic": topic, "reason_class": class}); ok {
				t.Errorf("delayq_jobs_failed_total{topic=%q,reason_class=%q} = %v: a retried attempt is not a failed job", topic, class, got)
			}
		}
	}
	// No series names a raw path.
	for _, m := range fs["delayq_http_request_duration_seconds"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "route" && (strings.Contains(l.GetValue(), "mail") || strings.Contains(l.GetValue(), "m7")) {
				t.Errorf("route label %q is a raw path", l.GetValue())
			}
		}
	}
}
