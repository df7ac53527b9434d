package auth

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestSessions: a login with a token in force starts a session whose
// principal follows the table in force; a reload that revokes the token
// ends it, a logout ends it, and so does its lifetime.
func TestSessions(t *testing.T) {
	p := filepath.Join(t.TempDir(), "auth.json")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	both := `{"tokens":[{"name":"ops","sha256":"` + HashToken("ops-token") + `","scopes":["admin"]},
		{"name":"viewer","sha256":"` + HashToken("viewer-token") + `","scopes":["read"],"topics":["shop/*"]}]}`
	write(both)
	st, err := Load(p, "")
	if err != nil {
		t.Fatal(err)
	}
	s := NewSessions(st)
	now := time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC)
	s.now = func() time.Time { return now }

	if id, pr, _ := s.Login("wrong"); id != "" || pr != nil || s.Len() != 0 {
		t.Fatalf("a login with an unknown token = %q %v, %d sessions; want none", id, pr, s.Len())
	}
	ops, pr, exp := s.Login("ops-token")
	if pr == nil || pr.Name != "ops" || len(ops) != 43 || !exp.Equal(now.Add(SessionTTL)) {
		t.Fatalf("login = %q %v %v", ops, pr, exp)
	}
	viewer, _, _ := s.Login("viewer-token")
	if ops == viewer {
		t.Fatal("two logins got the same id")
	}
	if pr, _ := s.Principal(ops); pr == nil || !pr.AllowsAll(Admin) {
		t.Fatalf("the session's principal = %v, want ops", pr)
	}
	if pr, _ := s.Principal(viewer); pr == nil || !pr.Allows(Read, "shop/x") || pr.Allows(Read, "mail") {
		t.Fatalf("the viewer session's principal = %v", pr)
	}
	if pr, _ := s.Principal("forged"); pr != nil {
		t.Fatal("an unknown id has a principal")
	}

	// A reload that revokes ops ends its session at once; the viewer's
	// stays.
	write(`{"tokens":[{"name":"viewer","sha256":"` + HashToken("viewer-token") + `","scopes":["read"],"topics":["shop/*"]}]}`)
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if pr, _ := s.Principal(ops); pr != nil {
		t.Fatal("the session outlived the reload that revoked its token")
	}
	// Putting the token back does not revive the dropped session.
	write(both)
	if err := st.Reload(); err != nil {
		t.Fatal(err)
	}
	if pr, _ := s.Principal(ops); pr != nil {
		t.Fatal("a session revoked by a reload came back")
	}
	if pr, _ := s.Principal(viewer); pr == nil {
		t.Fatal("the viewer's session ended with another token's revocation")
	}

	// Logout, then the lifetime.
	s.Logout(viewer)
	if pr, _ := s.Principal(viewer); pr != nil {
		t.Fatal("the session outlived its logout")
	}
	late, _, _ := s.Login("ops-token")
	now = now.Add(SessionTTL - time.Second)
	if pr, _ := s.Principal(late); pr == nil {
		t.Fatal("the session ended before its lifetime")
	}
	now = now.Add(time.Second)
	if pr, _ := s.Principal(late); pr != nil {
		t.Fatal("the session outlived its lifetime")
	}
	if s.Len() != 0 {
		t.Errorf("%d sessions left, want 0", s.Len())
	}

	var none *Sessions = NewSessions(nil)
	if id, pr, _ := none.Login("ops-token"); none != nil || id != "" || pr != nil {
		t.Error("a server without tokens started a session")
	}
}

// TestSessionsBoundedPerToken (issue 28 item 6): 10,100 logins with a
// read-only token end only that token's own oldest sessions; the admin's
// session, older than all of them, lives on. (The old table dropped the
// session that ended first, whoever's it was, once it held 10,000: the
// admin's.)
func TestSessionsBoundedPerToken(t *testing.T) {
	st, err := Load("", `{"tokens":[{"name":"admin","sha256":"`+HashToken("a")+`","scopes":["admin"]},
		{"name":"viewer","sha256":"`+HashToken("v")+`","scopes":["read"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSessions(st)
	now := time.Now()
	s.now = func() time.Time { return now }
	admin, _, _ := s.Login("a")
	first, _, _ := s.Login("v")
	var last string
	for range MaxSessions + 100 {
		now = now.Add(time.Millisecond)
		last, _, _ = s.Login("v")
	}
	if pr, _ := s.Principal(admin); pr == nil || pr.Name != "admin" {
		t.Fatal("another token's logins ended the admin's session")
	}
	if pr, _ := s.Principal(first); pr != nil {
		t.Error("the viewer's oldest session survived its bound")
	}
	if pr, _ := s.Principal(last); pr == nil {
		t.Error("the viewer's newest session was dropped")
	}
	if n := s.Len(); n != 1+DefaultMaxPerToken {
		t.Errorf("%d sessions held, want the admin's and the viewer's %d", n, DefaultMaxPerToken)
	}
}

// TestSessionsBounded: without a bound per token, the table stops at
// MaxSessions: a login ends its own token's oldest session, and never
// another's while it has one.
func TestSessionsBounded(t *testing.T) {
	st, err := Load("", `{"tokens":[{"name":"ops","sha256":"`+HashToken("t")+`","scopes":["read"]},
		{"name":"admin","sha256":"`+HashToken("a")+`","scopes":["admin"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSessions(st)
	s.SetMaxPerToken(0)
	now := time.Now()
	s.now = func() time.Time { return now }
	admin, _, _ := s.Login("a")
	first, _, _ := s.Login("t")
	for range MaxSessions - 2 {
		now = now.Add(time.Millisecond)
		s.Login("t")
	}
	second, _, _ := s.Login("t")
	if s.Len() != MaxSessions {
		t.Fatalf("%d sessions, want %d", s.Len(), MaxSessions)
	}
	if pr, _ := s.Principal(first); pr != nil {
		t.Error("the token's oldest session survived the bound")
	}
	if pr, _ := s.Principal(second); pr == nil {
		t.Error("the newest session was dropped")
	}
	if pr, _ := s.Principal(admin); pr == nil {
		t.Error("another token's session was dropped while the token had its own")
	}
}

// TestSessionsEndedAreDropped: sessions that ended leave the table as
// later logins come, without a walk of the table (a few from the front
// of the order they end in, at each login), and nothing of their
// tokens' books is left behind.
func TestSessionsEndedAreDropped(t *testing.T) {
	st, err := Load("", `{"tokens":[{"name":"ops","sha256":"`+HashToken("t")+`","scopes":["read"]},
		{"name":"admin","sha256":"`+HashToken("a")+`","scopes":["admin"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSessions(st)
	now := time.Now()
	s.now = func() time.Time { return now }
	for range DefaultMaxPerToken {
		s.Login("t")
	}
	now = now.Add(SessionTTL)
	for i := range DefaultMaxPerToken / 2 {
		s.Login("a")
		if want := DefaultMaxPerToken - 2*(i+1) + i + 1; s.Len() != want {
			t.Fatalf("after %d logins past the end: %d sessions, want %d", i+1, s.Len(), want)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, left := s.byToken[HashToken("t")]; left || s.order.Len() != len(s.byID) {
		t.Errorf("books left behind: token list kept %v, order %d, table %d", left, s.order.Len(), len(s.byID))
	}
}
