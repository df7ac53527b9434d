package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// The slot map: which master serves each Cluster hash slot.
//
// A Cluster instance groups its puts per master (masterput.go): one
// script on a master inserts the puts of every topic that master holds
// and writes their seq entries, which it can do only when it knows which
// master serves which slot. rueidis keeps such a map for its routing but
// does not show it, so the store reads its own from CLUSTER SLOTS (Redis
// 3 and later): at the first grouped put, every slotMapEvery after, and
// at once when a script found a key that its master no longer serves.
// The map is only ever a hint. A put routed by a stale map is refused
// by Redis ("non local key") before it changes anything of the topic it
// names first, and is written the way a lone Cluster put is
// (clusterput.go), whose every step names its slot.

// slotMapEvery is how often an instance reads the slot map again while
// it puts: a resharding moves slots in seconds to minutes, and a put
// routed by an old map costs one refused script, not a wrong write.
const slotMapEvery = 10 * time.Second

// slotMap is the last slot map read, and when.
type slotMap struct {
	mu         sync.Mutex
	owner      []string  // guarded by mu: per slot, the master's "host:port", "" when none or not read yet
	masters    int       // guarded by mu: how many masters serve a slot
	at         time.Time // guarded by mu: when it was read (zero: never)
	refreshing bool      // guarded by mu: a read is under way
}

// masterOfKey names the master that serves key by the slot map, "" when
// the map does not know (not read yet, or the slot unserved). It starts
// a read of the map in the background when the map is missing or older
// than slotMapEvery.
func (s *Store) masterOfKey(key string) string {
	m := &s.slots
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.refreshing && (m.at.IsZero() || time.Since(m.at) >= slotMapEvery) {
		m.refreshing = true
		go s.readSlots()
	}
	if m.owner == nil {
		return ""
	}
	return m.owner[keyHashSlot(key)]
}

// mastersKnown is how many masters the slot map names (0 before it is
// read).
func (s *Store) mastersKnown() int {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return s.slots.masters
}

// slotsMoved says the map is out of date: a master refused a key it was
// named for. The next lookup reads it again.
func (s *Store) slotsMoved() {
	s.slots.mu.Lock()
	s.slots.at = time.Time{}
	s.slots.mu.Unlock()
}

// readSlots reads the slot map; on failure the old one stays, and the
// next lookup after slotMapEvery tries again.
func (s *Store) readSlots() {
	ctx, cancel := context.WithTimeout(s.ctx, 5*time.Second)
	defer cancel()
	owner, masters, err := s.clusterSlots(ctx)
	m := &s.slots
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refreshing = false
	m.at = time.Now()
	if err != nil {
		if s.log != nil {
			s.log.Warn("redis: could not read the Cluster slot map; puts go topic by topic until it is read", "err", err)
		}
		return
	}
	m.owner, m.masters = owner, masters
}

// clusterSlots asks CLUSTER SLOTS which master serves each slot. Each
// entry of the reply is [first slot, last slot, [host, port, ...],
// replicas...].
func (s *Store) clusterSlots(ctx context.Context) (owner []string, masters int, err error) {
	entries, err := s.c.Do(ctx, s.c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, 0, err
	}
	owner = make([]string, clusterSlots)
	seen := map[string]bool{}
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, 0, fmt.Errorf("CLUSTER SLOTS: an entry of %d fields", len(f))
		}
		from, err1 := f[0].AsInt64()
		to, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || from < 0 || to >= clusterSlots || from > to {
			return nil, 0, fmt.Errorf("CLUSTER SLOTS: a malformed entry")
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		addr := fmt.Sprintf("%s:%d", host, port)
		seen[addr] = true
		for slot := from; slot <= to; slot++ {
			owner[slot] = addr
		}
	}
	return owner, len(seen), nil
}

// keyHashSlot is the Cluster slot of key: of its hash tag, the part
// between the first "{" and the first "}" after it when that part is not
// empty, else of the whole key.
func keyHashSlot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return keySlot(key[i+1 : i+1+j])
		}
	}
	return keySlot(key)
}
