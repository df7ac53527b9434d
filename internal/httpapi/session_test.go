package httpapi

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/auth"
)

// sessionServer is a real server (socket, guard, tokens from a file) with
// the dashboard's sessions.
type sessionServer struct {
	t        *testing.T
	url      string
	authFile string
	tokens   *auth.Store
	sessions *auth.Sessions
}

func newSessionServer(t *testing.T) *sessionServer {
	t.Helper()
	s := &sessionServer{t: t, authFile: filepath.Join(t.TempDir(), "auth.json")}
	s.writeAuth("ops-token", "viewer-token")
	var err error
	if s.tokens, err = auth.Load(s.authFile, ""); err != nil {
		t.Fatal(err)
	}
	s.sessions = auth.NewSessions(s.tokens)
	a := newAPI(t, Options{Sessions: s.sessions})
	srv := httptest.NewServer(Guard(a.e, a.h, GuardOptions{Auth: s.tokens, Sessions: s.sessions, Logger: discard()}))
	t.Cleanup(srv.Close)
	s.url = srv.URL
	return s
}

// writeAuth writes the auth file with the tokens given: "ops-token"
// (admin) and "viewer-token" (read).
func (s *sessionServer) writeAuth(tokens ...string) {
	s.t.Helper()
	var entries []string
	for _, tok := range tokens {
		name, scope := strings.TrimSuffix(tok, "-token"), "read"
		if name == "ops" {
			scope = "admin"
		}
		entries = append(entries, `{"name":"`+name+`","sha256":"`+auth.HashToken(tok)+`","scopes":["`+scope+`"]}`)
	}
	if err := os.WriteFile(s.authFile, []byte(`{"tokens":[`+strings.Join(entries, ",")+`]}`), 0o600); err != nil {
		s.t.Fatal(err)
	}
}

// send sends one request with the headers given ("Cookie", "Origin", ...)
// and returns the answer with its body read.
func (s *sessionServer) send(method, path, body string, header ...string) (*http.Response, string) {
	s.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	r, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(r)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// login logs in with token and returns the session cookie.
func (s *sessionServer) login(token string) *http.Cookie {
	s.t.Helper()
	resp, body := s.send("POST", "/v1/session", `{"token":"`+token+`"}`, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusOK {
		s.t.Fatalf("login = %d %s", resp.StatusCode, body)
	}
	for _, c := range resp.Cookies() {
		if c.Name == SessionCookie {
			return c
		}
	}
	s.t.Fatalf("login set no %s cookie: %v", SessionCookie, resp.Header["Set-Cookie"])
	return nil
}

// TestSessionLogin: POST /v1/session with a valid token sets an HttpOnly,
// SameSite=Strict cookie holding a random id (not the token), which then
// stands for the token; a wrong token sets nothing.
func TestSessionLogin(t *testing.T) {
	s := newSessionServer(t)
	resp, body := s.send("POST", "/v1/session", `{"token":"wrong"}`)
	if resp.StatusCode != http.StatusUnauthorized || errorOf(t, body).Code != api.CodeUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("login with a wrong token = %d %s %v", resp.StatusCode, body, resp.Cookies())
	}
	if resp, body := s.send("POST", "/v1/session", `{"token":"ops-token"}`, "Sec-Fetch-Site", "cross-site"); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("login from another site = %d %s", resp.StatusCode, body)
	}
	c := s.login("ops-token")
	if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode || c.Path != "/" || c.Secure || strings.Contains(c.Value, "ops-token") || len(c.Value) != 43 {
		t.Fatalf("session cookie = %+v, want HttpOnly, SameSite=Strict, Path=/, a random id", c)
	}
	cookie := SessionCookie + "=" + c.Value

	resp, body = s.send("GET", "/v1/session", "", "Cookie", cookie)
	var sess api.Session
	if err := json.Unmarshal([]byte(body), &sess); err != nil || resp.StatusCode != 200 || !sess.Auth || sess.Name != "ops" || sess.Expires == nil {
		t.Fatalf("GET /v1/session with the cookie = %d %s", resp.StatusCode, body)
	}
	if resp, body := s.send("GET", "/v1/topics", "", "Cookie", cookie); resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/topics with the cookie = %d %s", resp.StatusCode, body)
	}
	if resp, _ := s.send("GET", "/v1/topics", ""); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("GET /v1/topics without it = %d", resp.StatusCode)
	}
}

// TestSessionCSRF: a change made with the session cookie must come from
// the server's own origin, as the browser says; reads need not, and a
// bearer token (not sent by browsers on their own) is not asked.
func TestSessionCSRF(t *testing.T) {
	s := newSessionServer(t)
	cookie := SessionCookie + "=" + s.login("ops-token").Value
	put := `{"body":"x"}`
	for _, tc := range []struct {
		header []string
		want   int
	}{
		{[]string{"Cookie", cookie}, http.StatusForbidden}, // says nothing: not a browser's fetch
		{[]string{"Cookie", cookie, "Sec-Fetch-Site", "cross-site"}, http.StatusForbidden},
		{[]string{"Cookie", cookie, "Sec-Fetch-Site", "same-site"}, http.StatusForbidden},
		{[]string{"Cookie", cookie, "Origin", "http://evil.example"}, http.StatusForbidden},
		{[]string{"Cookie", cookie, "Origin", "null"}, http.StatusForbidden},
		{[]string{"Cookie", cookie, "Sec-Fetch-Site", "same-origin"}, http.StatusCreated},
		{[]string{"Cookie", cookie, "Origin", s.url}, http.StatusCreated},
		{[]string{"Authorization", "Bearer ops-token"}, http.StatusCreated},
	} {
		resp, body := s.send("POST", "/v1/topics/t/jobs", put, tc.header...)
		if resp.StatusCode != tc.want {
			t.Errorf("put with %q = %d %s, want %d", tc.header[2:], resp.StatusCode, body, tc.want)
		}
	}
	var top api.Topic
	resp, body := s.send("GET", "/v1/topics/t", "", "Cookie", cookie)
	if err := json.Unmarshal([]byte(body), &top); err != nil || resp.StatusCode != 200 || top.Ready != 3 {
		t.Fatalf("topic after the puts = %d %s, want 3 ready (the refused puts stored nothing)", resp.StatusCode, body)
	}
}

// TestSessionEnds: a reload that revokes the token ends its sessions;
// a logout ends the session on the server, not only in the browser.
func TestSessionEnds(t *testing.T) {
	s := newSessionServer(t)
	ops := SessionCookie + "=" + s.login("ops-token").Value
	viewer := SessionCookie + "=" + s.login("viewer-token").Value

	s.writeAuth("viewer-token")
	if err := s.tokens.Reload(); err != nil {
		t.Fatal(err)
	}
	resp, body := s.send("GET", "/v1/topics", "", "Cookie", ops)
	if resp.StatusCode != http.StatusUnauthorized || !strings.Contains(errorOf(t, body).Message, "session has ended") {
		t.Fatalf("the revoked token's session = %d %s, want 401", resp.StatusCode, body)
	}
	if resp, _ := s.send("GET", "/v1/topics", "", "Cookie", viewer); resp.StatusCode != http.StatusOK {
		t.Fatalf("the viewer's session after another token's revocation = %d", resp.StatusCode)
	}

	resp, body = s.send("DELETE", "/v1/session", "", "Cookie", viewer, "Sec-Fetch-Site", "same-origin")
	if resp.StatusCode != http.StatusNoContent {
		t.Fatalf("logout = %d %s", resp.StatusCode, body)
	}
	cleared := false
	for _, c := range resp.Cookies() {
		cleared = cleared || c.Name == SessionCookie && c.Value == "" && c.MaxAge < 0
	}
	if !cleared {
		t.Errorf("logout did not clear the cookie: %v", resp.Header["Set-Cookie"])
	}
	if resp, _ := s.send("GET", "/v1/topics", "", "Cookie", viewer); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a logged-out session's cookie, sent again = %d, want 401", resp.StatusCode)
	}
	if s.sessions.Len() != 0 {
		t.Errorf("%d sessions left on the server", s.sessions.Len())
	}
}

// TestSessionWithoutTokens: a server without tokens says so (the
// dashboard then shows no login) and has nothing to log in to.
func TestSessionWithoutTokens(t *testing.T) {
	a := newAPI(t, Options{})
	srv := httptest.NewServer(Guard(a.e, a.h, GuardOptions{Logger: discard()}))
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + "/v1/session")
	if err != nil {
		t.Fatal(err)
	}
	var sess api.Session
	err = json.NewDecoder(resp.Body).Decode(&sess)
	resp.Body.Close()
	if err != nil || sess.Auth || sess.Name != "open" {
		t.Fatalf("GET /v1/session without tokens = %+v (%v), want auth false", sess, err)
	}
	resp, err = http.Post(srv.URL+"/v1/session", "application/json", strings.NewReader(`{"token":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("login without tokens = %d, want 404", resp.StatusCode)
	}
}
