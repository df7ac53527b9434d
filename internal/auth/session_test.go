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

// TestSessionsBounded: at MaxSessions, a login drops the session that
// ends first, and the table never grows past the bound.
func TestSessionsBounded(t *testing.T) {
	st, err := Load("", `{"tokens":[{"name":"ops","sha256":"`+HashToken("t")+`","scopes":["read"]}]}`)
	if err != nil {
		t.Fatal(err)
	}
	s := NewSessions(st)
	now := time.Now()
	s.now = func() time.Time { return now }
	first, _, _ := s.Login("t")
	for range MaxSessions - 1 {
		now = now.Add(time.Millisecond)
		s.Login("t")
	}
	second, _, _ := s.Login("t")
	if s.Len() != MaxSessions {
		t.Fatalf("%d sessions, want %d", s.Len(), MaxSessions)
	}
	if pr, _ := s.Principal(first); pr != nil {
		t.Error("the oldest session survived the bound")
	}
	if pr, _ := s.Principal(second); pr == nil {
		t.Error("the newest session was dropped")
	}
}
