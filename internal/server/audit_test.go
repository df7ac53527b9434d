package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/config"
	"github.com/delayq/delayq/internal/tlsconf/tlstest"
)

// logRecords parses the JSON log lines of buf.
func logRecords(t *testing.T, buf *syncBuffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split([]byte(buf.String()), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var rec map[string]any
		if err := json.Unmarshal(line, &rec); err != nil {
			t.Fatalf("log line %q is not JSON: %v", line, err)
		}
		out = append(out, rec)
	}
	return out
}

// startJSONServer starts a server logging JSON at level error through the
// configuration's own logger (config.NewLogger: the handler setup the
// process uses), into logs.
func startJSONServer(t *testing.T, mutate func(*config.Config)) (*Server, *syncBuffer) {
	t.Helper()
	cfg := testConfig(t)
	cfg.LogFormat = "json"
	cfg.LogLevel = "error" // the audit trail is always on; so is an access log asked for
	mutate(&cfg)
	logs := &syncBuffer{}
	s := New(cfg, cfg.NewLogger(logs))
	if err := s.Start(t.Context()); err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(func() {
		if err := s.Shutdown(context.Background()); err != nil {
			t.Errorf("Shutdown() = %v", err)
		}
	})
	return s, logs
}

// tokenCall sends one request with a bearer token and returns the status and
// body.
func tokenCall(t *testing.T, hc *http.Client, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// beanstalkLine sends one command (and data) and reads one reply line.
func beanstalkLine(t *testing.T, c net.Conn, r *bufio.Reader, cmd string) string {
	t.Helper()
	if _, err := c.Write([]byte(cmd)); err != nil {
		t.Fatal(err)
	}
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("%q: %v", cmd, err)
	}
	return strings.TrimSpace(line)
}

// TestAuditTrail drives a real server over real sockets through every
// audited change (HTTP /v1, the original protocol, beanstalkd, a token
// reload) and hot-path calls, and checks the log holds exactly one audit
// record per change, with its principal, target and outcome, and none for
// put, reserve and finish of a held job. Before the audit trail, a purge
// or a policy change left no line at all.
func TestAuditTrail(t *testing.T) {
	s, logs := startJSONServer(t, func(c *config.Config) { c.AuthFile = authFile(t, "shop-token") })
	hc := plainClient(t)
	u := s.URL()
	must := func(want int, method, path, token, body string) string {
		t.Helper()
		code, b := tokenCall(t, hc, method, u+path, token, body)
		if code != want {
			t.Fatalf("%s %s = %d %s, want %d", method, path, code, b, want)
		}
		return b
	}
	// The hot path: put, reserve, finish. No audit records.
	must(201, "POST", "/v1/topics/orders/jobs", "shop-token", `{"id":"o1","body":"x"}`)
	must(201, "POST", "/v1/topics/orders/jobs/batch", "shop-token", `{"jobs":[{"id":"o2"},{"id":"o3"},{"id":"o4"},{"id":"o5","delay":"1h"}]}`)
	var res struct {
		Jobs []struct{ ID, Reservation string }
	}
	json.Unmarshal([]byte(must(200, "POST", "/v1/reserve", "worker-token", `{"topics":["orders"],"n":1}`)), &res)
	if len(res.Jobs) != 1 {
		t.Fatalf("reserve = %+v", res)
	}
	must(200, "POST", "/v1/jobs/"+res.Jobs[0].ID+"/finish", "worker-token", fmt.Sprintf(`{"reservation":%q}`, res.Jobs[0].Reservation))

	// Audited changes over HTTP.
	must(200, "DELETE", "/v1/jobs/o2", "ops-token", "")
	must(404, "DELETE", "/v1/jobs/nosuch", "ops-token", "")
	must(200, "DELETE", "/v1/jobs/o3", "shop-token", "") // a producer revokes its job
	must(200, "PATCH", "/v1/jobs/o4", "ops-token", `{"priority":5}`)
	must(404, "PATCH", "/v1/jobs/nosuch", "ops-token", `{"priority":5}`)
	must(200, "POST", "/v1/jobs/o5/kick", "ops-token", "") // delayed 1h: ready now
	must(409, "POST", "/v1/jobs/o5/kick", "ops-token", "") // nothing left to kick
	must(200, "POST", "/v1/topics/orders/pause", "ops-token", `{"for":"1m"}`)
	must(200, "POST", "/v1/topics/orders/resume", "ops-token", "")
	must(201, "PUT", "/v1/topics/orders/policy", "ops-token", `{"max_attempts":3}`)
	must(204, "DELETE", "/v1/topics/orders/policy", "ops-token", "")
	must(200, "POST", "/v1/topics/orders/kick", "ops-token", `{"n":10}`)
	must(403, "DELETE", "/v1/topics/orders/jobs?state=ready", "worker-token", "")
	must(200, "DELETE", "/v1/topics/orders/jobs?state=ready", "ops-token", "")
	must(201, "PUT", "/v1/schedules/beat", "ops-token", `{"topic":"beats","every":"1h"}`)
	must(200, "POST", "/v1/schedules/beat/pause", "ops-token", "")
	must(200, "POST", "/v1/schedules/beat/resume", "ops-token", "")
	must(204, "DELETE", "/v1/schedules/beat", "ops-token", "")
	must(201, "PUT", "/v1/alarms/pager", "ops-token", `{"url":"http://127.0.0.1:1/hook","when":{"buried_over":0}}`)
	must(204, "DELETE", "/v1/alarms/pager", "ops-token", "")
	must(200, "GET", "/v1/backup", "ops-token", "")

	// The original protocol: finish is its consumer's (hot path), delete
	// an operator's.
	must(201, "POST", "/v1/topics/orders/jobs", "shop-token", `{"id":"o6","body":"x"}`)
	must(201, "POST", "/v1/topics/orders/jobs", "shop-token", `{"id":"o7","body":"x"}`)
	must(200, "POST", "/v1/command", "ops-token", `{"command":"finish","id":"o6"}`)
	must(200, "POST", "/v1/command", "ops-token", `{"command":"delete","id":"o7"}`)

	// beanstalkd: a delete of a held job is its finish; a delete of a job
	// the connection does not hold, a kick and a pause-tube are audited.
	bc, err := net.Dial("tcp", s.BeanstalkAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer bc.Close()
	bc.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(bc)
	beanstalkLine(t, bc, br, "use tasks\r\n")
	put := func() string {
		reply := beanstalkLine(t, bc, br, "put 0 0 60 1\r\nx\r\n")
		if !strings.HasPrefix(reply, "INSERTED ") {
			t.Fatalf("put = %q", reply)
		}
		return strings.TrimPrefix(reply, "INSERTED ")
	}
	held, loose := put(), put()
	// beanstalkd names jobs by number; the audit record names it by id.
	var listed struct {
		Jobs []struct {
			ID  string
			Seq uint64
		}
	}
	json.Unmarshal([]byte(must(200, "GET", "/v1/topics/tasks/jobs?state=ready", "ops-token", "")), &listed)
	looseID := ""
	for _, j := range listed.Jobs {
		if fmt.Sprint(j.Seq) == loose {
			looseID = j.ID
		}
	}
	beanstalkLine(t, bc, br, "watch tasks\r\n")
	if reply := beanstalkLine(t, bc, br, "reserve-with-timeout 0\r\n"); reply != "RESERVED "+held+" 1" {
		t.Fatalf("reserve = %q", reply)
	}
	br.ReadString('\n') // the body
	if reply := beanstalkLine(t, bc, br, "delete "+held+"\r\n"); reply != "DELETED" {
		t.Fatalf("delete held = %q", reply)
	}
	if reply := beanstalkLine(t, bc, br, "delete "+loose+"\r\n"); reply != "DELETED" {
		t.Fatalf("delete loose = %q", reply)
	}
	// kick-job of a delayed job: an operator's change, by number.
	reply := beanstalkLine(t, bc, br, "put 0 3600 60 1\r\nx\r\n")
	if !strings.HasPrefix(reply, "INSERTED ") {
		t.Fatalf("put delayed = %q", reply)
	}
	delayed := strings.TrimPrefix(reply, "INSERTED ")
	if reply := beanstalkLine(t, bc, br, "kick-job "+delayed+"\r\n"); reply != "KICKED" {
		t.Fatalf("kick-job = %q", reply)
	}
	json.Unmarshal([]byte(must(200, "GET", "/v1/topics/tasks/jobs?state=ready", "ops-token", "")), &listed)
	kickedID := ""
	for _, j := range listed.Jobs {
		if fmt.Sprint(j.Seq) == delayed {
			kickedID = j.ID
		}
	}
	if kickedID == "" {
		t.Fatalf("the job kick-job %s made ready is not listed ready: %+v", delayed, listed.Jobs)
	}
	beanstalkLine(t, bc, br, "kick 5\r\n")
	beanstalkLine(t, bc, br, "pause-tube tasks 1\r\n")

	// A token reload (what SIGHUP does).
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}

	type rec struct{ action, target, outcome, principal, protocol string }
	want := []rec{
		{"job.delete", "job:o2", "ok", "ops", "http"},
		{"job.delete", "job:nosuch", "not_found", "ops", "http"},
		{"job.delete", "job:o3", "ok", "shop", "http"},
		{"job.update", "job:o4", "ok", "ops", "http"},
		{"job.update", "job:nosuch", "not_found", "ops", "http"},
		{"job.kick", "job:o5", "ok", "ops", "http"},
		{"job.kick", "job:o5", "bad_state", "ops", "http"},
		{"topic.pause", "topic:orders", "ok", "ops", "http"},
		{"topic.resume", "topic:orders", "ok", "ops", "http"},
		{"policy.put", "topic:orders", "ok", "ops", "http"},
		{"policy.delete", "topic:orders", "ok", "ops", "http"},
		{"topic.kick", "topic:orders", "ok", "ops", "http"},
		{"topic.purge", "topic:orders", "forbidden", "worker", "http"},
		{"topic.purge", "topic:orders", "ok", "ops", "http"},
		{"schedule.put", "schedule:beat", "ok", "ops", "http"},
		{"schedule.pause", "schedule:beat", "ok", "ops", "http"},
		{"schedule.resume", "schedule:beat", "ok", "ops", "http"},
		{"schedule.delete", "schedule:beat", "ok", "ops", "http"},
		{"alarm.put", "alarm:pager", "ok", "ops", "http"},
		{"alarm.delete", "alarm:pager", "ok", "ops", "http"},
		{"backup", "store", "ok", "ops", "http"},
		{"job.delete", "job:o7", "ok", "ops", "json"},
		{"job.delete", "job:" + looseID, "ok", "open", "beanstalk"},
		{"job.kick", "job:" + kickedID, "ok", "open", "beanstalk"},
		{"topic.kick", "topic:tasks", "ok", "open", "beanstalk"},
		{"topic.pause", "topic:tasks", "ok", "open", "beanstalk"},
		{"tokens.reload", s.cfg.AuthFile, "ok", "system", "signal"},
	}
	var got []rec
	var purged map[string]any
	for _, r := range logRecords(t, logs) {
		if r["access"] != nil {
			t.Errorf("access record without --access-log: %v", r)
		}
		if r["audit"] != true {
			continue
		}
		str := func(k string) string { s, _ := r[k].(string); return s }
		if r["msg"] != "audit" || r["level"] != "INFO" || str("time") == "" {
			t.Errorf("audit record %v: want msg audit, level INFO and a time", r)
		}
		if p := str("protocol"); p != "signal" && !strings.HasPrefix(str("remote"), "127.0.0.1:") {
			t.Errorf("audit record %v has no client address", r)
		}
		got = append(got, rec{str("action"), str("target"), str("outcome"), str("principal"), str("protocol")})
		if str("action") == "topic.purge" && str("outcome") == "ok" {
			purged = r
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit records:\n got %v\nwant %v", got, want)
	}
	if purged == nil || purged["deleted"] != float64(2) || purged["state"] != "ready" {
		t.Errorf("purge record = %v, want deleted 2 and state ready", purged)
	}
}

// TestAccessLogAndDurations: with --access-log, each request leaves one
// record naming its route pattern (not the raw path), status, bytes,
// duration, principal and remote address; and
// every duration in the JSON log is a Go duration string (it was a count
// of nanoseconds).
func TestAccessLogAndDurations(t *testing.T) {
	s, logs := startJSONServer(t, func(c *config.Config) {
		c.AuthFile = authFile(t, "shop-token")
		c.AccessLog = true
		c.LogLevel = "info" // for the startup record's duration
	})
	hc := plainClient(t)
	u := s.URL()
	type req struct {
		method, path, token, body string
		route                     string
		status                    int
		principal                 string
	}
	reqs := []req{
		{"POST", "/v1/topics/orders/jobs", "shop-token", `{"id":"a1","body":"x"}`, "/v1/topics/{topic}/jobs", 201, "shop"},
		{"GET", "/v1/jobs/a1", "ops-token", "", "/v1/jobs/{id}", 200, "ops"},
		{"DELETE", "/v1/jobs/a1", "ops-token", "", "/v1/jobs/{id}", 200, "ops"},
		{"GET", "/v1/jobs/a1", "nosuch-token", "", "/v1/jobs/{id}", 401, ""},
		{"GET", "/no/such/path", "ops-token", "", "unmatched", 404, "ops"},
	}
	var sizes []int
	for _, r := range reqs {
		code, body := tokenCall(t, hc, r.method, u+r.path, r.token, r.body)
		if code != r.status {
			t.Fatalf("%s %s = %d %s, want %d", r.method, r.path, code, body, r.status)
		}
		sizes = append(sizes, len(body))
	}
	var access []map[string]any
	tookSeen := false
	for _, rec := range logRecords(t, logs) {
		if rec["access"] == true {
			access = append(access, rec)
		}
		if took, ok := rec["took"]; ok { // "store opened", at startup
			tookSeen = true
			if ts, ok := took.(string); !ok {
				t.Errorf("took = %v (%T), want a duration string", took, took)
			} else if _, err := time.ParseDuration(ts); err != nil {
				t.Errorf("took = %q: %v", ts, err)
			}
		}
	}
	if !tookSeen {
		t.Error("no startup record with a duration (took) in the log")
	}
	if len(access) != len(reqs) {
		t.Fatalf("%d access records for %d requests: %v", len(access), len(reqs), access)
	}
	for i, r := range reqs {
		a := access[i]
		if a["method"] != r.method || a["route"] != r.route || a["status"] != float64(r.status) ||
			a["bytes"] != float64(sizes[i]) || a["principal"] != r.principal || a["msg"] != "http request" {
			t.Errorf("access record %d = %v, want %s %s %d, %d bytes, principal %q", i, a, r.method, r.route, r.status, sizes[i], r.principal)
		}
		if !strings.HasPrefix(fmt.Sprint(a["remote"]), "127.0.0.1:") {
			t.Errorf("access record %d remote = %v", i, a["remote"])
		}
		ds, ok := a["duration"].(string)
		if d, err := time.ParseDuration(ds); !ok || err != nil || d <= 0 {
			t.Errorf("access record %d duration = %v (%T), want a positive Go duration string", i, a["duration"], a["duration"])
		}
	}
}

// TestAuditCertificateReload: a reload (SIGHUP) of a server with TLS
// writes a certificates.reload record beside tokens.reload, ok when the
// files load, and the failure's code when they do not (the old
// certificate stays in force).
func TestAuditCertificateReload(t *testing.T) {
	ca := tlstest.NewCA(t)
	cert, key := ca.Issue(t, "server", "localhost")
	s, logs := startJSONServer(t, func(c *config.Config) {
		c.AuthFile = authFile(t, "shop-token")
		c.TLSCert, c.TLSKey = cert, key
	})
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cert, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err == nil {
		t.Fatal("Reload with a broken certificate file = nil, want its error")
	}
	type rec struct{ action, target, outcome, principal, protocol string }
	want := []rec{
		{"tokens.reload", s.cfg.AuthFile, "ok", "system", "signal"},
		{"certificates.reload", cert, "ok", "system", "signal"},
		{"tokens.reload", s.cfg.AuthFile, "ok", "system", "signal"},
		{"certificates.reload", cert, "internal", "system", "signal"},
	}
	var got []rec
	for _, r := range logRecords(t, logs) {
		if r["audit"] != true {
			continue
		}
		str := func(k string) string { s, _ := r[k].(string); return s }
		got = append(got, rec{str("action"), str("target"), str("outcome"), str("principal"), str("protocol")})
		if str("outcome") != "ok" && str("err") == "" {
			t.Errorf("failed reload's record %v does not say why (err)", r)
		}
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("audit records:\n got %v\nwant %v", got, want)
	}
}
