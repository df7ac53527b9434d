package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
)

// getJSON GETs path from s over real HTTP and decodes the answer into out.
func getJSON(t *testing.T, s *Server, path string, out any) {
	t.Helper()
	resp, err := http.Get(s.URL() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET %s = %d %s", path, resp.StatusCode, b)
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// scrape returns the text of s's /metrics.
func scrape(t *testing.T, s *Server) string {
	t.Helper()
	resp, err := http.Get(s.URL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestJobCountersOverHTTP: a job released, buried, kicked and expired
// reads its counters back over GET /v1/jobs/{id} (they used to read 0,
// the wire job had no such fields), and the same events show in /metrics
// and in beanstalkd's stats source, per topic.
func TestJobCountersOverHTTP(t *testing.T) {
	s := startServer(t, testConfig(t), &syncBuffer{})
	defer http.DefaultClient.CloseIdleConnections()
	c := newClient(t, s)
	ctx := context.Background()
	if _, err := c.Put(ctx, "counted", client.PutRequest{ID: "j", Body: []byte("x"), TTR: time.Second}); err != nil {
		t.Fatal(err)
	}
	reserve := func() string {
		t.Helper()
		js, err := c.Reserve(ctx, []string{"counted"}, 1, 5*time.Second)
		if err != nil || len(js) != 1 {
			t.Fatalf("Reserve = %v, %v", js, err)
		}
		return js[0].Reservation
	}
	if _, err := c.Release(ctx, "j", reserve(), 0, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Bury(ctx, "j", reserve(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.KickJob(ctx, "j"); err != nil {
		t.Fatal(err)
	}
	reserve() // and let its 1 s TTR run out
	var j api.Job
	waitUntil(t, "the TTR expiry", func() bool {
		getJSON(t, s, "/v1/jobs/j", &j)
		return j.State == "ready"
	})
	if j.Attempts != 3 || j.Timeouts != 1 || j.Releases != 1 || j.Buries != 1 || j.Kicks != 1 {
		t.Errorf("GET /v1/jobs/j = attempts %d timeouts %d releases %d buries %d kicks %d; want 3 1 1 1 1",
			j.Attempts, j.Timeouts, j.Releases, j.Buries, j.Kicks)
	}
	text := scrape(t, s)
	for _, line := range []string{
		`delayq_releases_total{topic="counted"} 1`,
		`delayq_buries_total{topic="counted"} 1`,
		`delayq_ttr_expired_total{topic="counted"} 1`,
		`delayq_fire_lateness_seconds_bucket{le="0.0001"}`,
		`delayq_store_commit_seconds_count`,
		`delayq_oldest_ready_age_seconds{topic="counted"}`,
	} {
		if !strings.Contains(text, line) {
			t.Errorf("/metrics lacks %s", line)
		}
	}
	if strings.Contains(text, "delayq_store_commit_seconds_count 0\n") {
		t.Error("delayq_store_commit_seconds counted no commit after several writes")
	}
	m := s.Engine().Metrics()
	if m.TimeoutsTotal() != 1 || m.ReleasesTotal() != 1 || m.BuriesTotal() != 1 {
		t.Errorf("totals = timeouts %d releases %d buries %d, want 1 1 1", m.TimeoutsTotal(), m.ReleasesTotal(), m.BuriesTotal())
	}
	if got := m.ByTopic()["counted"].Failures(); got != 3 {
		t.Errorf("failures of topic counted = %d, want 3", got)
	}
}
