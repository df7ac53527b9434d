package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sync"
	"time"
)

// Dashboard sessions.
//
// A session is a random id the server keeps, mapped to the hash of the
// token that logged in; the browser holds only the id, in an HttpOnly
// cookie. Every request looks the token's hash up again in the table in
// force, so a reload that revokes the token (or changes its scopes) ends
// the session (or changes what it may do) at once, and logging out deletes
// the id on the server, so a copied cookie is dead too. A signed cookie
// (an HMAC over the token's hash) would need no table, but could not be
// revoked by a logout and would need a key shared by every instance; the
// table is per process, so a restart logs the dashboard out and, behind a
// load balancer over several instances, each instance needs its own login
// (docs/security.md).

// Session lifetimes and bounds.
const (
	// SessionTTL is how long a login lasts, used or not: a working day.
	SessionTTL = 12 * time.Hour
	// MaxSessions bounds the table: beyond it, logging in drops the
	// session that would end first. Dashboards are few; this only keeps a
	// flood of logins from growing memory.
	MaxSessions = 10000
)

// Sessions holds the dashboard's logins over a Store. A nil *Sessions (a
// server without tokens) has none, and its methods say so.
type Sessions struct {
	store *Store
	ttl   time.Duration
	now   func() time.Time

	mu   sync.Mutex
	byID map[string]session // by the SHA-256 of the id, so the table holds no cookie
}

type session struct {
	tokenHash string
	expires   time.Time
}

// NewSessions returns the sessions of store; nil when store is nil (a
// server without tokens needs no login).
func NewSessions(store *Store) *Sessions {
	if store == nil {
		return nil
	}
	return &Sessions{store: store, ttl: SessionTTL, now: time.Now, byID: make(map[string]session)}
}

// Login checks token against the table in force and, when it is valid,
// starts a session: it returns the session's id (256 random bits, for the
// cookie), its principal and when it ends. An unknown token returns nil
// and starts nothing.
func (s *Sessions) Login(token string) (id string, p *Principal, expires time.Time) {
	if s == nil || token == "" {
		return "", nil, time.Time{}
	}
	hash := HashToken(token)
	if p = s.store.cur.Load().byHash[hash]; p == nil {
		return "", nil, time.Time{}
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	id = base64.RawURLEncoding.EncodeToString(b[:])
	now := s.now()
	expires = now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.byID) >= MaxSessions {
		s.evict(now)
	}
	s.byID[sessionKey(id)] = session{tokenHash: hash, expires: expires}
	return id, p, expires
}

// evict drops ended sessions and, when none had ended, the one that ends
// first. Called with mu held.
func (s *Sessions) evict(now time.Time) {
	first, firstEnd := "", time.Time{}
	for k, v := range s.byID {
		if !now.Before(v.expires) {
			delete(s.byID, k)
			continue
		}
		if first == "" || v.expires.Before(firstEnd) {
			first, firstEnd = k, v.expires
		}
	}
	if len(s.byID) >= MaxSessions {
		delete(s.byID, first)
	}
}

// Principal returns the principal of session id: that of its token in the
// table in force now, or nil when the id is unknown, the session has ended
// or its token was revoked by a reload (the session is then dropped).
func (s *Sessions) Principal(id string) (*Principal, time.Time) {
	if s == nil || id == "" {
		return nil, time.Time{}
	}
	k := sessionKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[k]
	if !ok {
		return nil, time.Time{}
	}
	p := s.store.cur.Load().byHash[v.tokenHash]
	if p == nil || !s.now().Before(v.expires) {
		delete(s.byID, k)
		return nil, time.Time{}
	}
	return p, v.expires
}

// Logout ends session id, if it exists.
func (s *Sessions) Logout(id string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	delete(s.byID, sessionKey(id))
	s.mu.Unlock()
}

// Len is how many sessions are held (ended ones not yet dropped included).
func (s *Sessions) Len() int {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.byID)
}

func sessionKey(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}

// Caller is who made a request, as the HTTP guard found out: the
// principal, and whether a session cookie (not a token or a certificate)
// proved it.
type Caller struct {
	Principal *Principal
	Session   bool
}

type callerKey struct{}

// WithCaller returns ctx carrying c, for the handlers behind the guard.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller ctx carries, and false when none.
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// Scopes returns p's scopes; the open principal's is admin.
func (p *Principal) Scopes() []Scope {
	if p == nil {
		return nil
	}
	if p.all {
		return []Scope{Admin}
	}
	return append([]Scope(nil), p.scopes...)
}

// Topics returns the globs of the topics p may touch.
func (p *Principal) Topics() []string {
	if p == nil {
		return nil
	}
	if p.all {
		return []string{"*"}
	}
	return append([]string(nil), p.topics...)
}
