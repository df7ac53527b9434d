package metrics

import (
	"testing"
	"time"

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
	if by["a"] != (TopicCounts{Timeouts: 3, Releases: 2}) || by["b"].Failures() != 1 || len(by) != 2 {
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

// TestTopicLabelsBounded: past the bound, new topics count under
// OtherTopic, while the topics already named keep their series.
func TestTopicLabelsBounded(t *testing.T) {
	m := New(nil)
	m.LimitTopicLabels(2)
	m.JobsPut("a", 1)
	m.JobsPut("b", 1)
	m.JobsPut("c", 3) // beyond the bound
	m.JobsFailed("d", FailBuried, 1)
	m.JobsPut("a", 1) // already named
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
			if mt.Counter != nil {
				got[key] = mt.GetCounter().GetValue()
			}
		}
	}
	want := map[string]float64{
		"delayq_jobs_put_total topic=a":                                    2,
		"delayq_jobs_put_total topic=b":                                    1,
		"delayq_jobs_put_total topic=" + OtherTopic:                        3,
		"delayq_jobs_failed_total reason_class=buried topic=" + OtherTopic: 1,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, ok := got["delayq_jobs_put_total topic=c"]; ok {
		t.Error("topic c has its own series beyond the bound")
	}
}
