package server

import (
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/delayq/delayq/internal/auth"
	"github.com/delayq/delayq/internal/httpapi"
)

// TestDashboardSessionOverHTTP: the server wires the dashboard's sessions
// into both the API (login) and the guard (the cookie stands for the
// token): log in, read and change with the cookie from the server's own
// origin, be refused from another, and lose the session when a reload
// revokes the token.
func TestDashboardSessionOverHTTP(t *testing.T) {
	t.Parallel()
	cfg := testConfig(t)
	cfg.AuthFile = authFile(t, "shop-token")
	s := startServer(t, cfg, &syncBuffer{})
	hc := plainClient(t)
	send := func(method, path, body string, header ...string) *http.Response {
		t.Helper()
		req, err := http.NewRequest(method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := send("POST", "/v1/session", `{"token":"nope"}`, "Sec-Fetch-Site", "same-origin"); resp.StatusCode != 401 {
		t.Fatalf("login with an unknown token = %d", resp.StatusCode)
	}
	resp := send("POST", "/v1/session", `{"token":"ops-token"}`, "Sec-Fetch-Site", "same-origin")
	var cookie string
	for _, c := range resp.Cookies() {
		if c.Name == httpapi.SessionCookie && c.HttpOnly && c.SameSite == http.SameSiteStrictMode {
			cookie = c.Name + "=" + c.Value
		}
	}
	if resp.StatusCode != 200 || cookie == "" {
		t.Fatalf("login = %d, cookies %v", resp.StatusCode, resp.Header["Set-Cookie"])
	}
	for _, c := range []struct {
		name, method, path, body string
		header                   []string
		want                     int
	}{
		{"read", "GET", "/v1/topics", "", nil, 200},
		{"change from the dashboard", "POST", "/v1/topics/orders/jobs", `{"body":"x"}`, []string{"Sec-Fetch-Site", "same-origin"}, 201},
		{"change from another site", "POST", "/v1/topics/orders/jobs", `{"body":"x"}`, []string{"Sec-Fetch-Site", "cross-site", "Origin", "http://evil.example"}, 403},
		{"change saying nothing", "POST", "/v1/topics/orders/jobs", `{"body":"x"}`, nil, 403},
	} {
		if resp := send(c.method, c.path, c.body, append([]string{"Cookie", cookie}, c.header...)...); resp.StatusCode != c.want {
			t.Errorf("%s with the session cookie = %d, want %d", c.name, resp.StatusCode, c.want)
		}
	}

	// The auth file with another token for ops: its session ends at the
	// reload.
	text := strings.Replace(string(mustRead(t, cfg.AuthFile)), auth.HashToken("ops-token"), auth.HashToken("other-token"), 1)
	if err := os.WriteFile(cfg.AuthFile, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.Reload(); err != nil {
		t.Fatal(err)
	}
	if resp := send("GET", "/v1/topics", "", "Cookie", cookie); resp.StatusCode != 401 {
		t.Errorf("the session after a reload revoked its token = %d, want 401", resp.StatusCode)
	}
}
