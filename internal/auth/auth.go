// Package auth decides who may do what: tokens (and client certificates)
// with scopes limited to topic globs, read from a JSON file or the
// environment, kept only as SHA-256 hashes, and reloaded without a restart.
//
// Tokens are meant to be long random strings (`delayq token` makes one with
// 256 bits), so a single SHA-256 is enough to keep them safe at rest: a
// slow password hash (argon2id, bcrypt) protects low-entropy secrets from
// guessing, which a 256-bit random token does not need, and it would cost
// every request milliseconds. A token is looked up by its hash, so the
// server never holds or compares the token itself.
package auth

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"
)

// Scope is a kind of access. Admin implies every other scope.
type Scope string

// The scopes. Each call of the HTTP API and each beanstalkd command needs
// one of them on the topic it touches; docs/security.md maps them.
const (
	// Produce: put jobs, and revoke (delete) them.
	Produce Scope = "produce"
	// Consume: reserve jobs and finish, release, touch or bury them.
	Consume Scope = "consume"
	// Read: look at jobs, topics, stats and metrics without changing them.
	Read Scope = "read"
	// Admin: everything, including kick, pause and update.
	Admin Scope = "admin"
)

func validScope(s Scope) bool {
	switch s {
	case Produce, Consume, Read, Admin:
		return true
	}
	return false
}

// Principal is an authenticated client: a token's or a certificate's entry
// of the auth file. A nil *Principal is nobody and is allowed nothing; Open
// is allowed everything.
type Principal struct {
	// Name names the entry in logs and keys its request rate.
	Name   string
	scopes []Scope
	topics []string // globs; "*" matches every topic
	all    bool     // allowed everything (the open server)
}

// Open is the principal of a server without tokens, and of plain
// beanstalkd connections on loopback: allowed everything.
var Open = &Principal{Name: "open", all: true}

func (p *Principal) hasScope(s Scope) bool {
	for _, have := range p.scopes {
		if have == s || have == Admin {
			return true
		}
	}
	return false
}

// Allows reports whether p may use scope on topic.
func (p *Principal) Allows(s Scope, topic string) bool {
	if p == nil {
		return false
	}
	if p.all {
		return true
	}
	if !p.hasScope(s) {
		return false
	}
	for _, g := range p.topics {
		if Match(g, topic) {
			return true
		}
	}
	return false
}

// AllowsAll reports whether p may use scope on every topic: calls whose
// topics are not known before they run (the original protocol, stats of
// the whole server) need it.
func (p *Principal) AllowsAll(s Scope) bool {
	if p == nil {
		return false
	}
	if p.all {
		return true
	}
	if !p.hasScope(s) {
		return false
	}
	for _, g := range p.topics {
		if g == "*" {
			return true
		}
	}
	return false
}

// AllowsSome reports whether p may use scope on at least one topic: calls
// that prove their right some other way (finish with a reservation, which
// only the consumer that reserved the job holds) need only that.
func (p *Principal) AllowsSome(s Scope) bool {
	if p == nil {
		return false
	}
	return p.all || p.hasScope(s) && len(p.topics) > 0
}

// Match reports whether topic matches glob, where '*' matches any run of
// bytes ('/' included: topic names may contain it) and '?' any one byte.
// Nothing else is special, so a glob without them is an exact name.
func Match(glob, topic string) bool {
	// Iterative matching with one backtrack point, linear in practice.
	gi, ti := 0, 0
	star, mark := -1, 0
	for ti < len(topic) {
		switch {
		case gi < len(glob) && (glob[gi] == '?' || glob[gi] == topic[ti]):
			gi++
			ti++
		case gi < len(glob) && glob[gi] == '*':
			star, mark = gi, ti
			gi++
		case star >= 0:
			gi = star + 1
			mark++
			ti = mark
		default:
			return false
		}
	}
	for gi < len(glob) && glob[gi] == '*' {
		gi++
	}
	return gi == len(glob)
}

// HashToken is the hex SHA-256 of a token, the form the auth file keeps.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Table is one loaded auth file: principals by token hash and by client
// certificate name.
type Table struct {
	byHash map[string]*Principal
	byName map[string]*Principal
	n      int
}

// Len is how many entries the table has.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return t.n
}

// Store holds the current table and reloads it from its file. Its methods
// are safe for concurrent use; a nil *Store means no tokens (open).
type Store struct {
	path   string
	inline string
	cur    atomic.Pointer[Table]
	mu     sync.Mutex // serialises Reload
}

// Load reads the auth entries from the file at path and from inline (the
// same JSON, from the environment); either may be empty. With neither it
// returns nil: the server runs without tokens.
func Load(path, inline string) (*Store, error) {
	if path == "" && strings.TrimSpace(inline) == "" {
		return nil, nil
	}
	s := &Store{path: path, inline: inline}
	if err := s.Reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// Reload reads the file again and swaps the table in whole; on any error
// the old table stays in force (a typo in the file must not open or lock
// out the server).
func (s *Store) Reload() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var entries []Entry
	if s.path != "" {
		b, err := os.ReadFile(s.path)
		if err != nil {
			return fmt.Errorf("auth: %w", err)
		}
		f, err := Parse(b)
		if err != nil {
			return fmt.Errorf("auth: %s: %w", s.path, err)
		}
		entries = append(entries, f.Tokens...)
	}
	if strings.TrimSpace(s.inline) != "" {
		f, err := Parse([]byte(s.inline))
		if err != nil {
			return fmt.Errorf("auth: DELAYQ_AUTH: %w", err)
		}
		entries = append(entries, f.Tokens...)
	}
	t, err := build(entries)
	if err != nil {
		return err
	}
	s.cur.Store(t)
	return nil
}

// Len is how many entries are in force.
func (s *Store) Len() int {
	if s == nil {
		return 0
	}
	return s.cur.Load().Len()
}

// ByToken returns the principal of a bearer token, or nil.
func (s *Store) ByToken(token string) *Principal {
	if s == nil {
		return Open
	}
	if token == "" {
		return nil
	}
	return s.cur.Load().byHash[HashToken(token)]
}

// ByCert returns the principal a verified client certificate maps to: the
// entry listing its subject's common name or one of its DNS names, or nil.
func (s *Store) ByCert(cert *x509.Certificate) *Principal {
	if s == nil {
		return Open
	}
	if cert == nil {
		return nil
	}
	t := s.cur.Load()
	if p := t.byName[cert.Subject.CommonName]; p != nil && cert.Subject.CommonName != "" {
		return p
	}
	for _, n := range cert.DNSNames {
		if p := t.byName[n]; p != nil {
			return p
		}
	}
	return nil
}

func build(entries []Entry) (*Table, error) {
	t := &Table{byHash: make(map[string]*Principal), byName: make(map[string]*Principal), n: len(entries)}
	for _, e := range entries {
		p := &Principal{Name: e.Name, scopes: e.Scopes, topics: e.Topics}
		if len(p.topics) == 0 {
			p.topics = []string{"*"}
		}
		if e.SHA256 != "" {
			h := strings.ToLower(e.SHA256)
			if _, dup := t.byHash[h]; dup {
				return nil, fmt.Errorf("auth: token %q: the same token hash is listed twice", e.Name)
			}
			t.byHash[h] = p
		}
		for _, n := range e.ClientNames {
			if _, dup := t.byName[n]; dup {
				return nil, fmt.Errorf("auth: token %q: client name %q is listed twice", e.Name, n)
			}
			t.byName[n] = p
		}
	}
	return t, nil
}
