package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
)

// TestChartsSurviveRestartBinary: the real binary samples a fire, a finish
// and a failed attempt into its chart history; killed with SIGKILL and
// started again on the same data directory, it serves the same figures
// (in memory they would be gone), at 10 s and at one minute.
func TestChartsSurviveRestartBinary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the real binary")
	}
	d := buildDaemon(t)
	hc := &http.Client{Timeout: 10 * time.Second}
	ctx := t.Context()
	d.start(hc)
	const tp = "/v1/topics/charts"
	for _, id := range []string{"a", "b"} {
		if code, err := call(ctx, hc, "POST", d.url()+tp+"/jobs", api.PutRequest{ID: id, Body: ptrTo("x")}, nil); code != http.StatusCreated {
			t.Fatalf("put %s = %d %v", id, code, err)
		}
	}
	var r api.JobsResponse
	if code, err := call(ctx, hc, "POST", d.url()+"/v1/reserve", api.ReserveRequest{Topics: []string{"charts"}, N: 2}, &r); code != http.StatusOK || len(r.Jobs) != 2 {
		t.Fatalf("reserve = %d, %d jobs, %v", code, len(r.Jobs), err)
	}
	if code, err := call(ctx, hc, "POST", d.url()+"/v1/jobs/"+r.Jobs[0].ID+"/finish", api.ActionRequest{Reservation: r.Jobs[0].Reservation}, nil); code != http.StatusOK {
		t.Fatalf("finish = %d %v", code, err)
	}
	if code, err := call(ctx, hc, "POST", d.url()+"/v1/jobs/"+r.Jobs[1].ID+"/release", api.ReleaseRequest{Reservation: r.Jobs[1].Reservation, Delay: ptrTo(api.Duration(time.Hour))}, nil); code != http.StatusOK {
		t.Fatalf("release = %d %v", code, err)
	}
	if code, err := call(ctx, hc, "POST", d.url()+tp+"/jobs", api.PutRequest{ID: "soon", Body: ptrTo("x"), Delay: ptrTo(api.Duration(20 * time.Millisecond))}, nil); code != http.StatusCreated {
		t.Fatalf("put soon = %d %v", code, err)
	}
	sums := func(rng string) (fires, finishes, failures int, h api.TopicHistory) {
		t.Helper()
		if code, err := call(ctx, hc, "GET", d.url()+tp+"/history?range="+rng, nil, &h); code != http.StatusOK {
			t.Fatalf("GET history = %d %v", code, err)
		}
		for _, s := range h.Samples {
			fires, finishes, failures = fires+s.Fires, finishes+s.Finishes, failures+s.Failures
		}
		return fires, finishes, failures, h
	}
	// The server samples on the 10 s marks: wait for the sample that has
	// all three (polling an observable state).
	deadline := time.Now().Add(30 * time.Second)
	for {
		fi, fn, fa, h := sums("1h")
		if fi == 1 && fn == 1 && fa == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("history 30 s after a fire, a finish and a release = %+v, want them sampled\n%s", h, d.logTail())
		}
		time.Sleep(100 * time.Millisecond)
	}
	d.kill()
	d.start(hc)
	for _, rng := range []string{"1h", "7d"} {
		if fi, fn, fa, h := sums(rng); fi != 1 || fn != 1 || fa != 1 || !h.Sampled {
			t.Errorf("history (range %s) after kill -9 and restart = %+v: %d fires, %d finishes, %d failures; want the 1, 1, 1 sampled before", rng, h, fi, fn, fa)
		}
	}
	if err := d.stop(); err != nil {
		t.Errorf("SIGTERM: %v", err)
	}
}
