package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
)

// TestFinishBatch finishes a mix of good and bad entries in one call:
// each result is in request order, the good ones are finished, and every
// bad one fails alone with its own code.
func TestFinishBatch(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	for _, id := range []string{"a", "b", "c", "stale"} {
		a.put("t", `{"id":"`+id+`","body":"x"}`)
	}
	held := map[string]string{}
	for _, j := range a.reserve("t", 4) {
		held[j.ID] = j.Reservation
	}
	if len(held) != 4 {
		t.Fatalf("reserved %v, want 4 jobs", held)
	}
	// Make "stale"'s reservation stale: release it and reserve it again.
	a.must(http.StatusOK, "POST", "/v1/jobs/stale/release", `{"reservation":"`+held["stale"]+`"}`, nil)
	again := a.reserve("t", 1)
	if len(again) != 1 || again[0].ID != "stale" {
		t.Fatalf("re-reserve = %+v, want stale", again)
	}
	body := `{"jobs":[
		{"id":"a","reservation":"` + held["a"] + `"},
		{"id":"stale","reservation":"` + held["stale"] + `"},
		{"id":"nosuch","reservation":"1-1"},
		{"id":"b","reservation":""},
		{"reservation":"1-1"},
		{"id":"c","reservation":"` + held["c"] + `"}]}`
	var got api.FinishBatchResponse
	a.must(http.StatusOK, "POST", "/v1/jobs/finish", body, &got)
	want := []struct{ id, code, mention string }{
		{"a", "", ""},
		{"stale", "not_reserved", `"stale"`},
		{"nosuch", "not_found", `job "nosuch" not found`},
		{"b", "bad_reservation", "reservation"},
		{"", "bad_id", "id"},
		{"c", "", ""},
	}
	if len(got.Results) != len(want) {
		t.Fatalf("results = %+v, want %d", got.Results, len(want))
	}
	for i, w := range want {
		r := got.Results[i]
		switch {
		case r.ID != w.id:
			t.Errorf("result %d is for %q, want %q (request order)", i, r.ID, w.id)
		case w.code == "" && (!r.OK || r.Error != nil):
			t.Errorf("result %d (%s) = %+v, want ok", i, w.id, r)
		case w.code != "" && (r.OK || r.Error == nil || r.Error.Code != w.code || !strings.Contains(r.Error.Message, w.mention)):
			t.Errorf("result %d (%s) = %+v %+v, want error %s naming %s", i, w.id, r, r.Error, w.code, w.mention)
		}
	}
	for id, want := range map[string]int{"a": 404, "c": 404, "b": 200, "stale": 200} {
		if code, _ := a.do("GET", "/v1/jobs/"+id, ""); code != want {
			t.Errorf("GET %s after the batch = %d, want %d", id, code, want)
		}
	}
}

// TestFinishBatchEmpty: an empty list (or none) finishes nothing and
// answers an empty list, not an error.
func TestFinishBatchEmpty(t *testing.T) {
	t.Parallel()
	a := newAPI(t, Options{})
	for _, body := range []string{`{"jobs":[]}`, `{}`} {
		code, resp := a.do("POST", "/v1/jobs/finish", body)
		if code != http.StatusOK || strings.TrimSpace(resp) != `{"results":[]}` {
			t.Errorf("finish %s = %d %s, want 200 {\"results\":[]}", body, code, resp)
		}
	}
}
