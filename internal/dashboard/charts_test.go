package dashboard_test

import (
	"strings"
	"testing"
)

// TestChartsScript: charts.js is served, builds its DOM from elements and
// text nodes only (uPlot draws on canvases), and calls the API only through app.js's table (so
// TestScriptCallsOnlyRealEndpoints checks every endpoint it reads).
func TestChartsScript(t *testing.T) {
	t.Parallel()
	h := newAPI(t)
	r := do(t, h, "GET", "/ui/charts.js", "")
	if r.status != 200 || r.header.Get("Content-Type") != "text/javascript; charset=utf-8" {
		t.Fatalf("GET /ui/charts.js = %d %s", r.status, r.header.Get("Content-Type"))
	}
	for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "/v1/", "fetch("} {
		if strings.Contains(r.body, bad) {
			t.Errorf("charts.js uses %s", bad)
		}
	}
	for _, name := range []string{"'history'", "'due'"} {
		if !strings.Contains(r.body, "deps.call("+name) {
			t.Errorf("charts.js does not call %s through app.js's caller", name)
		}
	}
	if css := do(t, h, "GET", "/ui/charts.css", ""); css.status != 200 || !strings.Contains(css.body, ".u-tooltip") {
		t.Errorf("GET /ui/charts.css = %d, want the charts' stylesheet", css.status)
	}
	// uPlot, vendored from the npm registry with its license.
	for path, want := range map[string]string{
		"/ui/vendor/uplot/uPlot.iife.min.js": "https://github.com/leeoniya/uPlot (v1.6.32)",
		"/ui/vendor/uplot/uPlot.min.css":     ".uplot",
		"/ui/vendor/uplot/LICENSE":           "The MIT License (MIT)",
	} {
		if r := do(t, h, "GET", path, ""); r.status != 200 || !strings.Contains(r.body, want) {
			t.Errorf("GET %s = %d, want the vendored uPlot file", path, r.status)
		}
	}
}
