package auth

import (
	"container/list"
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
	// MaxSessions bounds the whole table, behind the bound per token
	// (SetMaxPerToken), which keeps it far smaller in practice: it is
	// reached only with the bound per token off or more than
	// MaxSessions/that bound tokens logged in at once. At it, a login
	// ends its own token's oldest session, or when it has none the
	// oldest session of all.
	MaxSessions = 10000
	// DefaultMaxPerToken is the bound on one token's sessions until
	// SetMaxPerToken says otherwise (--max-dashboard-sessions).
	DefaultMaxPerToken = 20
)

// Sessions holds the dashboard's logins over a Store. A nil *Sessions (a
// server without tokens) has none, and its methods say so.
//
// Every request that carries the cookie looks its session up under mu, so
// nothing under mu walks the table: a login ends its own token's oldest
// session when the token is at its bound (a token's logins never end
// another token's sessions), and ended sessions are dropped from the
// front of a list kept in the order they end (every session lasts the
// same ttl, so the order they began in), a few at each login.
type Sessions struct {
	store    *Store
	ttl      time.Duration
	now      func() time.Time
	perToken int

	mu      sync.Mutex
	byID    map[string]*session   // by the SHA-256 of the id, so the table holds no cookie
	order   list.List             // of *session, the first to end first
	byToken map[string]*list.List // each token's sessions (by its hash), the first to end first
}

type session struct {
	key       string // its key in byID
	tokenHash string
	expires   time.Time
	all, mine *list.Element // in order and in byToken[tokenHash]
}

// NewSessions returns the sessions of store; nil when store is nil (a
// server without tokens needs no login).
func NewSessions(store *Store) *Sessions {
	if store == nil {
		return nil
	}
	return &Sessions{store: store, ttl: SessionTTL, now: time.Now, perToken: DefaultMaxPerToken,
		byID: make(map[string]*session), byToken: make(map[string]*list.List)}
}

// SetMaxPerToken bounds the sessions of one token to n (<= 0: only the
// table's bound, MaxSessions). Call it before the sessions are used.
func (s *Sessions) SetMaxPerToken(n int) {
	if s != nil {
		s.perToken = n
	}
}

// Verify returns the principal of token in the table in force, or nil: a
// login's check before it is let through the request rate (Login checks
// again).
func (s *Sessions) Verify(token string) *Principal {
	if s == nil || token == "" {
		return nil
	}
	return s.store.cur.Load().byHash[HashToken(token)]
}

// Login checks token against the table in force and, when it is valid,
// starts a session: it returns the session's id (256 random bits, for the
// cookie), its principal and when it ends. An unknown token returns nil
// and starts nothing. When the token holds its bound of sessions, its own
// oldest session ends.
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
	key := sessionKey(id)
	now := s.now()
	expires = now.Add(s.ttl)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropEnded(now, 2)
	mine := s.byToken[hash]
	if mine == nil {
		mine = list.New()
		s.byToken[hash] = mine
	}
	switch {
	case s.perToken > 0 && mine.Len() >= s.perToken, len(s.byID) >= MaxSessions && mine.Len() > 0:
		s.drop(mine.Front().Value.(*session))
	case len(s.byID) >= MaxSessions:
		s.drop(s.order.Front().Value.(*session))
	}
	v := &session{key: key, tokenHash: hash, expires: expires}
	v.all = s.order.PushBack(v)
	v.mine = mine.PushBack(v)
	s.byID[key] = v
	return id, p, expires
}

// dropEnded drops up to n sessions that have ended, from the front of
// the order. Called with mu held; two per login outpace the logins, so
// the ended ones never pile up.
func (s *Sessions) dropEnded(now time.Time, n int) {
	for ; n > 0; n-- {
		e := s.order.Front()
		if e == nil || now.Before(e.Value.(*session).expires) {
			return
		}
		s.drop(e.Value.(*session))
	}
}

// drop removes v from the table. Called with mu held.
func (s *Sessions) drop(v *session) {
	delete(s.byID, v.key)
	s.order.Remove(v.all)
	if mine := s.byToken[v.tokenHash]; mine != nil {
		mine.Remove(v.mine)
		if mine.Len() == 0 {
			delete(s.byToken, v.tokenHash)
		}
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
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.byID[k]
	if !ok {
		return nil, time.Time{}
	}
	p := s.store.cur.Load().byHash[v.tokenHash]
	if p == nil || !now.Before(v.expires) {
		s.drop(v)
		return nil, time.Time{}
	}
	return p, v.expires
}

// Logout ends session id, if it exists.
func (s *Sessions) Logout(id string) {
	if s == nil {
		return
	}
	k := sessionKey(id)
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := s.byID[k]; ok {
		s.drop(v)
	}
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
