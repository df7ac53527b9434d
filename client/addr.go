package client

import (
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"
)

// normalizeAddr turns "127.0.0.1:7480", "host:7480" or "http://host:7480/"
// into a base URL without a trailing slash.
func normalizeAddr(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return "", fmt.Errorf("client: empty address")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return "", fmt.Errorf("client: address %q: %w", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "", fmt.Errorf("client: address %q: scheme must be http or https", s)
	}
	if u.Host == "" {
		return "", fmt.Errorf("client: address %q: no host", s)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("client: address %q: no query or fragment allowed", s)
	}
	return strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"), nil
}

// endpoint is one server address and what the client knows of its health.
type endpoint struct {
	base      string
	seed      bool      // given by the user: never forgotten
	downUntil time.Time // after a transport error, skipped until then
	failures  int       // consecutive transport errors, for the down period
}

// addrSet is the list of servers a Client spreads calls over. Seeds come from
// the user; members learned from GET /v1/cluster are added beside them.
type addrSet struct {
	mu   sync.Mutex
	eps  []*endpoint // guarded by mu
	next int         // guarded by mu: round-robin position
}

func newAddrSet(bases []string) *addrSet {
	s := &addrSet{}
	for _, b := range bases {
		s.add(b, true)
	}
	return s
}

// add inserts base unless it is already known; it reports whether it did.
func (s *addrSet) add(base string, seed bool) bool {
	for _, e := range s.eps {
		if e.base == base {
			e.seed = e.seed || seed
			return false
		}
	}
	s.eps = append(s.eps, &endpoint{base: base, seed: seed})
	return true
}

// setMembers replaces the learned (non-seed) members with bases.
func (s *addrSet) setMembers(bases []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	keep := s.eps[:0]
	want := make(map[string]bool, len(bases))
	for _, b := range bases {
		want[b] = true
	}
	for _, e := range s.eps {
		if e.seed || want[e.base] {
			keep = append(keep, e)
		}
	}
	s.eps = keep
	for _, b := range bases {
		s.add(b, false)
	}
}

// pick returns the next address in round-robin order, preferring the ones
// that are not marked down, and never one of skip unless all are in skip.
func (s *addrSet) pick(now time.Time, skip map[string]bool) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.eps)
	var fallback *endpoint
	for i := range n {
		e := s.eps[(s.next+i)%n]
		if skip[e.base] {
			continue
		}
		if now.Before(e.downUntil) {
			if fallback == nil || e.downUntil.Before(fallback.downUntil) {
				fallback = e
			}
			continue
		}
		s.next = (s.next + i + 1) % n
		return e.base
	}
	if fallback != nil {
		return fallback.base
	}
	// Every address was tried in this call: start over.
	e := s.eps[s.next%n]
	s.next = (s.next + 1) % n
	return e.base
}

// bases returns every known address.
func (s *addrSet) bases() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, len(s.eps))
	for i, e := range s.eps {
		out[i] = e.base
	}
	return out
}

// markDown records a transport error: the address is skipped for a period
// that doubles with each consecutive failure (100 ms up to 10 s).
func (s *addrSet) markDown(base string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.eps {
		if e.base == base {
			e.failures++
			d := 100 * time.Millisecond << min(e.failures-1, 7)
			e.downUntil = now.Add(min(d, 10*time.Second))
		}
	}
}

// markUp records an answer from base.
func (s *addrSet) markUp(base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.eps {
		if e.base == base {
			e.failures = 0
			e.downUntil = time.Time{}
		}
	}
}
