package metrics

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/buildinfo"
)

// TestBuildInfo checks that delayq_build_info is exported once, valued 1,
// with the labels of the running build.
func TestBuildInfo(t *testing.T) {
	m := New(nil)
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatalf("Gather() = %v", err)
	}
	want := buildinfo.Read()
	for _, f := range families {
		if f.GetName() != "delayq_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("delayq_build_info has %d series, want 1", len(f.GetMetric()))
		}
		mt := f.GetMetric()[0]
		if v := mt.GetGauge().GetValue(); v != 1 {
			t.Errorf("delayq_build_info = %v, want 1", v)
		}
		labels := map[string]string{}
		for _, l := range mt.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		wantLabels := map[string]string{"version": want.Version, "revision": want.Revision, "goversion": want.GoVersion}
		// The version a user pins: the repository's VERSION file.
		if file, err := os.ReadFile("../../VERSION"); err != nil {
			t.Fatal(err)
		} else if v := strings.TrimSpace(string(file)); labels["version"] != v {
			t.Errorf("delayq_build_info label version = %q, want the VERSION file's %q", labels["version"], v)
		}
		for k, v := range wantLabels {
			if labels[k] != v {
				t.Errorf("delayq_build_info label %s = %q, want %q", k, labels[k], v)
			}
		}
		if len(labels) != len(wantLabels) {
			t.Errorf("delayq_build_info labels = %v, want exactly %v", labels, wantLabels)
		}
		return
	}
	t.Fatal("delayq_build_info not exported")
}

// TestFailureCounters: releases, buries and TTR expiries count per topic
// in /metrics and in the plain totals beanstalkd's stats and the alarms
// read, so all report one number.
func TestFailureCounters(t *testing.T) {
	m := New(nil)
	m.Release("a")
	m.Release("a")
	m.Bury("b")
	m.Timeouts("a", 3)
	m.Timeouts("c", 0) // nothing expired: no series
	got := map[string]float64{}
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, mt := range f.GetMetric() {
			key := f.GetName()
			for _, l := range mt.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			if c := mt.GetCounter(); c != nil {
				got[key] = c.GetValue()
			}
		}
	}
	for key, want := range map[string]float64{
		"delayq_releases_total topic=a":    2,
		"delayq_buries_total topic=b":      1,
		"delayq_ttr_expired_total topic=a": 3,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v", key, got[key], want)
		}
	}
	if _, ok := got["delayq_ttr_expired_total topic=c"]; ok {
		t.Error("a topic with no expiry has a delayq_ttr_expired_total series")
	}
	if m.TimeoutsTotal() != 3 || m.ReleasesTotal() != 2 || m.BuriesTotal() != 1 {
		t.Errorf("totals = %d %d %d, want 3 2 1", m.TimeoutsTotal(), m.ReleasesTotal(), m.BuriesTotal())
	}
	by := m.ByTopic()
	if a := by["a"]; a.Timeouts != 3 || a.Releases != 2 || a.Buries != 0 || a.Finishes != 0 || by["b"].Failures() != 1 || len(by) != 2 {
		t.Errorf("ByTopic() = %+v", by)
	}
}

// TestOldestReadyAge: the age of the oldest ready job, 0 with none ready.
func TestOldestReadyAge(t *testing.T) {
	now := time.Now()
	if got := OldestReadyAge(delayq.TopicStats{Ready: 2, OldestReady: now.Add(-90 * time.Second)}, now); got != 90*time.Second {
		t.Errorf("OldestReadyAge = %s, want 1m30s", got)
	}
	if got := OldestReadyAge(delayq.TopicStats{Ready: 0, OldestReady: now.Add(-time.Hour)}, now); got != 0 {
		t.Errorf("OldestReadyAge with none ready = %s, want 0", got)
	}
	if got := OldestReadyAge(delayq.TopicStats{Ready: 1, OldestReady: now.Add(time.Second)}, now); got != 0 {
		t.Errorf("OldestReadyAge of a job ready in the future = %s, want 0", got)
	}
}

// scrape serves m's registry as /metrics does and parses the text with
// Prometheus's own parser.
func scrape(t *testing.T, m *Metrics) map[string]*dto.MetricFamily {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	p := expfmt.NewTextParser(model.UTF8Validation)
	fs, err := p.TextToMetricFamilies(strings.NewReader(rec.Body.String()))
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fs
}

// byTopic is family name's values by topic label (series with other
// labels too are kept only when they match extra).
func byTopic(fs map[string]*dto.MetricFamily, name string, extra map[string]string) map[string]float64 {
	out := map[string]float64{}
next:
	for _, mt := range fs[name].GetMetric() {
		topic := ""
		for _, l := range mt.GetLabel() {
			if l.GetName() == "topic" {
				topic = l.GetValue()
			} else if extra[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		switch {
		case mt.Counter != nil:
			out[topic] = mt.GetCounter().GetValue()
		case mt.Gauge != nil:
			out[topic] = mt.GetGauge().GetValue()
		}
	}
	return out
}

// TestTopicLabelsBounded: with at most N topics named, 150 topics that
// each counted a different number of jobs give every per-topic family at
// most N+1 topic label values in /metrics; the first N topics seen keep
// their own series with their exact counts, and _other is exactly the
// sum of the rest, for the counters and for the job count gauges alike.
func TestTopicLabelsBounded(t *testing.T) {
	const n, topics = 100, 150
	var stats []delayq.TopicStats
	m := New(func(context.Context) ([]delayq.TopicStats, error) { return stats, nil })
	m.LimitTopicLabels(n)
	wantPut, wantFailed, wantReady := map[string]float64{}, map[string]float64{}, map[string]float64{}
	for i := range topics {
		name := fmt.Sprintf("t%03d", i)
		label := name
		if i >= n {
			label = OtherTopic
		}
		m.JobsPut(name, i+1)
		m.JobsFailed(name, FailBuried, 2*i+1)
		m.Release(name)
		wantPut[label] += float64(i + 1)
		wantFailed[label] += float64(2*i + 1)
		stats = append(stats, delayq.TopicStats{Name: name, Ready: 3 * i})
		wantReady[label] += float64(3 * i)
	}
	m.JobsPut("t000", 5) // named already: keeps its name
	wantPut["t000"] += 5
	fs := scrape(t, m)
	for _, c := range []struct {
		family string
		extra  map[string]string
		want   map[string]float64
	}{
		{"delayq_jobs_put_total", nil, wantPut},
		{"delayq_jobs_failed_total", map[string]string{"reason_class": FailBuried}, wantFailed},
		{"delayq_jobs", map[string]string{"state": "ready"}, wantReady},
	} {
		got := byTopic(fs, c.family, c.extra)
		if len(got) > n+1 {
			t.Errorf("%s has %d topic label values, want at most %d", c.family, len(got), n+1)
		}
		if diff := cmp.Diff(c.want, got); diff != "" {
			t.Errorf("%s by topic (-want +got):\n%s", c.family, diff)
		}
	}
	if got := byTopic(fs, "delayq_releases_total", nil); len(got) != n+1 || got[OtherTopic] != topics-n {
		t.Errorf("delayq_releases_total: %d label values, _other %v; want %d, %d", len(got), got[OtherTopic], n+1, topics-n)
	}
}

// TestForgetTopics: 20,000 topics that come and go leave the per-topic
// state (the remembered topics, ByTopic, the series of the named ones) at
// the live set once they have counted nothing for the hold; the freed
// label values go to new topics, and a topic counted again starts over
// under a new Gen.
func TestForgetTopics(t *testing.T) {
	const n, topics, hold = 10, 20_000, time.Minute
	m := New(nil)
	m.LimitTopicLabels(n)
	live := map[string]bool{}
	for i := range topics {
		name := fmt.Sprintf("t%05d", i)
		m.JobsPut(name, 1)
		m.JobsFinished(name, 1)
		if i%1000 == 0 {
			live[name] = true // the topics that keep jobs
		}
	}
	old := m.ByTopic()["t00001"]
	if got := m.Topics(); got != topics {
		t.Fatalf("Topics() = %d after %d topics, want %d", got, topics, topics)
	}
	isLive := func(topic string) bool { return live[topic] }
	if got := m.Forget(time.Now(), hold, isLive); got != topics {
		t.Errorf("Forget within the hold kept %d topics, want all %d", got, topics)
	}
	if got := m.Forget(time.Now().Add(hold), hold, isLive); got != len(live) {
		t.Errorf("Forget after the hold kept %d topics, want the %d live ones", got, len(live))
	}
	if got := len(m.ByTopic()); got != len(live) {
		t.Errorf("ByTopic() has %d topics, want %d", got, len(live))
	}
	fs := scrape(t, m)
	put := byTopic(fs, "delayq_jobs_put_total", nil)
	// t00000 is live and named; t00001..t00009 were named and are gone.
	want := map[string]float64{"t00000": 1, OtherTopic: topics - n}
	if diff := cmp.Diff(want, put); diff != "" {
		t.Errorf("delayq_jobs_put_total after Forget (-want +got):\n%s", diff)
	}
	m.JobsFinished("t00001", 1) // back again: a freed name, counts from zero
	m.JobsPut("new", 1)
	if c := m.ByTopic()["t00001"]; c.Finishes != 1 || c.Gen == old.Gen {
		t.Errorf("t00001 counted again = %+v, want Finishes 1 and a Gen other than %d", c, old.Gen)
	}
	put = byTopic(scrape(t, m), "delayq_jobs_put_total", nil)
	if _, ok := put["new"]; !ok {
		t.Errorf("a new topic did not get a freed label value: %v", put)
	}
}
