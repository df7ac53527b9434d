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
// The map is only ever a hint: rueidis routes the group's script by its
// first topic's slot, and a master refuses ("non local key") the first
// key of the script that it does not serve; the group is then written
// the way a lone Cluster put is (masterput.go, clusterput.go), whose
// every step names its slot.

// slotMapEvery is how often an instance reads the slot map again while
// it puts: a resharding moves slots in seconds to minutes, and a put
// routed by an old map costs one refused script, not a wrong write.
const slotMapEvery = 10 * time.Second

// slotMap is the last slot map read, and when.
type slotMap struct {
	mu         sync.Mutex
	owner      []string           // guarded by mu: per slot, the master's "host:port", "" when none or not read yet
	groups     *[seqGroups]string // guarded by mu: per seq group, the master of its tag (never written to: replaced)
	at         time.Time          // guarded by mu: when it was read (zero: never)
	refreshing bool               // guarded by mu: a read is under way
	failing    bool               // guarded by mu: the last read failed (logged once per streak)
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
	owner, err := s.clusterSlots(ctx)
	m := &s.slots
	m.mu.Lock()
	defer m.mu.Unlock()
	m.refreshing = false
	m.at = time.Now()
	if err != nil {
		if s.ctx.Err() != nil {
			return // closed while it read
		}
		if !m.failing && s.log != nil {
			s.log.Warn("redisstore: cannot read the Cluster slot map (CLUSTER SLOTS); puts go topic by topic until it is read", "err", err)
		}
		m.failing = true
		return
	}
	groups := new([seqGroups]string)
	for g := range groups {
		groups[g] = owner[keySlot(seqGroupTag(g))]
	}
	m.owner, m.groups, m.failing = owner, groups, false
}

// seqGroupMasters is, per seq group, the master of its tag by the slot
// map; nil when the map is not read yet.
func (s *Store) seqGroupMasters() *[seqGroups]string {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	return s.slots.groups
}

// clusterSlots asks CLUSTER SLOTS which master serves each slot. Each
// entry of the reply is [first slot, last slot, [host, port, ...],
// replicas...].
func (s *Store) clusterSlots(ctx context.Context) (owner []string, err error) {
	entries, err := s.c.Do(ctx, s.c.B().ClusterSlots().Build()).ToArray()
	if err != nil {
		return nil, err
	}
	owner = make([]string, clusterSlots)
	for _, e := range entries {
		f, err := e.ToArray()
		if err != nil || len(f) < 3 {
			return nil, fmt.Errorf("CLUSTER SLOTS: an entry of %d fields", len(f))
		}
		from, err1 := f[0].AsInt64()
		to, err2 := f[1].AsInt64()
		node, err3 := f[2].ToArray()
		if err1 != nil || err2 != nil || err3 != nil || len(node) < 2 || from < 0 || to >= clusterSlots || from > to {
			return nil, fmt.Errorf("CLUSTER SLOTS: a malformed entry")
		}
		host, _ := node[0].ToString()
		port, _ := node[1].AsInt64()
		addr := fmt.Sprintf("%s:%d", host, port)
		for slot := from; slot <= to; slot++ {
			owner[slot] = addr
		}
	}
	return owner, nil
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
