package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/client"
	"github.com/delayq/delayq/internal/auth"
)

// authzCall sends one request with token and returns the status and body.
func authzCall(t *testing.T, hc *http.Client, method, url, token, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func codeOf(b []byte) string {
	var e api.ErrorResponse
	json.Unmarshal(b, &e)
	return e.Error.Code
}

// The attack of issue 18: a token with produce and consume on a* guessed
// the reservation of a job in topic bvictim that another consumer held,
// and touched it, released it for an hour and finished it, each answered
// 200. Every call by that token on that job must now be refused, by
// topic, whatever reservation it presents (a guess, or the real one had
// it leaked); a token allowed on the topic must not be able to guess a
// reservation; and the job must come out of it untouched.
func TestReservationAttackOverHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	text := fmt.Sprintf(`{"tokens":[
	  {"name":"attacker","sha256":%q,"scopes":["produce","consume"],"topics":["a*"]},
	  {"name":"victim","sha256":%q,"scopes":["consume"],"topics":["bvictim"]},
	  {"name":"neighbour","sha256":%q,"scopes":["consume"],"topics":["b*"]},
	  {"name":"reader","sha256":%q,"scopes":["read"],"topics":["bvictim"]},
	  {"name":"ops","sha256":%q,"scopes":["admin"]}]}`,
		auth.HashToken("attacker"), auth.HashToken("victim"), auth.HashToken("neighbour"),
		auth.HashToken("reader"), auth.HashToken("ops"))
	cfg.AuthFile = filepath.Join(t.TempDir(), "auth.json")
	if err := os.WriteFile(cfg.AuthFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	u := s.URL()

	if st, b := authzCall(t, hc, "POST", u+"/v1/topics/bvictim/jobs", "ops", `{"id":"v1","body":"secret"}`); st != 201 {
		t.Fatalf("put: %d %s", st, b)
	}
	// The attacker has jobs of its own, which it may act on.
	authzCall(t, hc, "POST", u+"/v1/topics/a1/jobs", "attacker", `{"id":"mine","body":"x"}`)
	st, b := authzCall(t, hc, "POST", u+"/v1/reserve", "victim", `{"topics":["bvictim"]}`)
	var got api.JobsResponse
	if json.Unmarshal(b, &got); st != 200 || len(got.Jobs) != 1 {
		t.Fatalf("the victim's reserve: %d %s", st, b)
	}
	held := got.Jobs[0]
	if !regexp.MustCompile(`^\d+-1-[0-9a-f]{32}$`).MatchString(held.Reservation) {
		t.Fatalf("reservation %q is not <seq>-<attempt>-<128-bit tag>", held.Reservation)
	}
	guess := fmt.Sprintf("%d-1", held.Seq) // the old format, which anyone could write

	type call struct{ method, path, body string }
	calls := func(res string) []call {
		return []call{
			{"POST", "/v1/jobs/v1/touch", `{"reservation":"` + res + `"}`},
			{"POST", "/v1/jobs/v1/release", `{"reservation":"` + res + `","delay":"1h"}`},
			{"POST", "/v1/jobs/v1/bury", `{"reservation":"` + res + `"}`},
			{"POST", "/v1/jobs/v1/finish", `{"reservation":"` + res + `"}`},
		}
	}
	for _, res := range []string{guess, held.Reservation} {
		for _, c := range append(calls(res),
			call{"DELETE", "/v1/jobs/v1", ""},
			call{"GET", "/v1/jobs/v1", ""},
			call{"PATCH", "/v1/jobs/v1", `{"delay":"1h"}`},
			call{"POST", "/v1/jobs/v1/kick", ""},
		) {
			if st, b := authzCall(t, hc, c.method, u+c.path, "attacker", c.body); st != 403 || codeOf(b) != api.CodeForbidden {
				t.Errorf("attacker %s %s %s: %d %s, want 403 forbidden", c.method, c.path, c.body, st, b)
			}
		}
		st, b := authzCall(t, hc, "POST", u+"/v1/jobs/finish", "attacker", `{"jobs":[{"id":"v1","reservation":"`+res+`"}]}`)
		var fr api.FinishBatchResponse
		if json.Unmarshal(b, &fr); st != 200 || len(fr.Results) != 1 || fr.Results[0].OK || fr.Results[0].Error.Code != api.CodeForbidden {
			t.Errorf("attacker's batch finish: %d %s, want the entry forbidden", st, b)
		}
	}
	// The original protocol needs every topic; the attacker has not.
	if st, b := authzCall(t, hc, "POST", u+"/", "attacker", `{"command":"finish","id":"v1"}`); st != 403 {
		t.Errorf("attacker's original-protocol finish: %d %s", st, b)
	}
	// A token that may consume bvictim cannot guess the reservation:
	// the old format and a forged tag are both not_reserved.
	for _, res := range []string{guess, guess + "-" + strings.Repeat("0", 32), held.Reservation + "0", "x"} {
		for _, c := range calls(res) {
			if st, b := authzCall(t, hc, c.method, u+c.path, "neighbour", c.body); st != 409 || codeOf(b) != api.CodeNotReserved {
				t.Errorf("neighbour %s %s: %d %s, want 409 not_reserved", c.path, c.body, st, b)
			}
		}
	}

	// The job is as the victim left it: reserved under its reservation,
	// deadline unmoved, never released, buried or touched.
	var now api.Job
	st, b = authzCall(t, hc, "GET", u+"/v1/jobs/v1", "ops", "")
	if json.Unmarshal(b, &now); st != 200 || now.State != "reserved" || now.Reservation != held.Reservation ||
		!now.Deadline.Equal(held.Deadline.Time) || now.Attempts != 1 || now.Releases != 0 || now.Buries != 0 {
		t.Fatalf("the job after the attack: %d %s; it was reserved as %+v", st, b, held)
	}
	// A read scope sees the job but not its reservation, alone or listed.
	st, b = authzCall(t, hc, "GET", u+"/v1/jobs/v1", "reader", "")
	if st != 200 || strings.Contains(string(b), "reservation") || strings.Contains(string(b), held.Reservation) {
		t.Errorf("the reader's GET: %d %s", st, b)
	}
	st, b = authzCall(t, hc, "GET", u+"/v1/topics/bvictim/jobs", "reader", "")
	if st != 200 || strings.Contains(string(b), "reservation") || !strings.Contains(string(b), `"v1"`) {
		t.Errorf("the reader's list: %d %s", st, b)
	}
	// The attacker acts on its own jobs as before.
	st, b = authzCall(t, hc, "POST", u+"/v1/reserve", "attacker", `{"topics":["a1"]}`)
	if json.Unmarshal(b, &got); st != 200 || len(got.Jobs) != 1 {
		t.Fatalf("the attacker's own reserve: %d %s", st, b)
	}
	if st, b := authzCall(t, hc, "POST", u+"/v1/jobs/mine/finish", "attacker", `{"reservation":"`+got.Jobs[0].Reservation+`"}`); st != 200 {
		t.Errorf("the attacker's finish of its own job: %d %s", st, b)
	}
	// And the victim finishes its job.
	if st, b := authzCall(t, hc, "POST", u+"/v1/jobs/v1/finish", "victim", `{"reservation":"`+held.Reservation+`"}`); st != 200 {
		t.Errorf("the victim's finish: %d %s", st, b)
	}
}

// GET /v1/backup streams every job. A page of another site must not be
// able to start it (the cross-site GET, with no token configured,
// streamed a whole checkpoint), and with tokens it needs admin.
func TestBackupProtections(t *testing.T) {
	t.Parallel()
	open := startServer(t, testConfig(t), &syncBuffer{})
	hc := plainClient(t)
	get := func(u string, hdr map[string]string, token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", u+"/v1/backup", nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 {
			return 200, resp.Header.Get("Content-Type")
		}
		return resp.StatusCode, codeOf(b)
	}
	u := open.URL()
	host := strings.TrimPrefix(u, "http://")
	for _, c := range []struct {
		name   string
		hdr    map[string]string
		status int
		code   string
	}{
		{"cross-site fetch", map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, api.CodeCrossSite},
		{"same-site fetch", map[string]string{"Sec-Fetch-Site": "same-site"}, 403, api.CodeCrossSite},
		{"foreign Origin", map[string]string{"Origin": "http://evil.example"}, 403, api.CodeCrossSite},
		{"same origin", map[string]string{"Sec-Fetch-Site": "same-origin", "Origin": "http://" + host}, 200, "application/x-tar"},
		{"typed URL", map[string]string{"Sec-Fetch-Site": "none"}, 200, "application/x-tar"},
		{"not a browser", nil, 200, "application/x-tar"},
	} {
		if status, code := get(u, c.hdr, ""); status != c.status || code != c.code {
			t.Errorf("%s: %d %q, want %d %q", c.name, status, code, c.status, c.code)
		}
	}

	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	guarded := startServer(t, cfg, &syncBuffer{})
	for token, want := range map[string]int{"": 401, "shop-token": 403, "worker-token": 403, "ops-token": 200} {
		if status, code := get(guarded.URL(), nil, token); status != want {
			t.Errorf("backup with token %q: %d %s, want %d", token, status, code, want)
		}
	}
	if status, code := get(guarded.URL(), map[string]string{"Sec-Fetch-Site": "cross-site"}, "ops-token"); status != 403 || code != api.CodeCrossSite {
		t.Errorf("an admin's cross-site backup: %d %s", status, code)
	}
}

// Over Redis every instance signs reservations with the one key the
// store keeps: a job reserved through one instance is touched and
// finished through another, and a reservation without its tag is
// refused there too.
func TestReservationKeySharedOverRedis(t *testing.T) {
	url := redisURL(t)
	a, b := startOverRedis(t, url), startOverRedis(t, url)
	ca, cb := newClient(t, a), newClient(t, b)
	ctx := t.Context()
	topic := "authz-" + strings.ReplaceAll(t.Name(), "/", "-") + "-" + fmt.Sprint(os.Getpid())
	res, err := ca.Put(ctx, topic, client.PutRequest{Body: []byte("x")})
	if err != nil {
		t.Fatal(err)
	}
	jobs, err := ca.Reserve(ctx, []string{topic}, 1, 0)
	if err != nil || len(jobs) != 1 {
		t.Fatalf("reserve through A: %v, %v", jobs, err)
	}
	tok := jobs[0].Reservation
	bare := tok[:strings.LastIndexByte(tok, '-')]
	if _, err := cb.Touch(ctx, res.ID, bare); !errors.Is(err, delayq.ErrNotReserved) {
		t.Errorf("B took the untagged %q: %v", bare, err)
	}
	if _, err := cb.Touch(ctx, res.ID, tok); err != nil {
		t.Fatalf("B refused A's reservation: %v", err)
	}
	if err := cb.Finish(ctx, res.ID, tok); err != nil {
		t.Fatalf("finish through B: %v", err)
	}
}
