package metrics

import (
	"testing"

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
