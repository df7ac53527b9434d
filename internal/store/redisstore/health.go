package redisstore

import (
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/store"
)

var _ store.Healther = (*Store)(nil)

// Health implements store.Healther: why this instance cannot serve, or ""
// when Redis answered its last lease round. The lease loop asks Redis
// every LeaseTTL/3, so /readyz turns 503 within about that long after
// Redis goes away, and 200 again within as long after it answers. A round
// that hangs (a network that drops packets instead of refusing; rueidis
// gives up on a silent connection after its 3 s write timeout) counts as
// failed once no round has succeeded for 10 s (or four lease TTLs), long
// enough that a slow round on a loaded machine does not make the instance
// flap.
func (s *Store) Health() string {
	if s.ctx.Err() != nil {
		return "redis store closed"
	}
	l := s.leases
	l.mu.Lock()
	failing, renewed := l.failing, l.renewed
	l.mu.Unlock()
	// The body of /healthz is public: it says what, and the log (which
	// has the Redis error, with addresses) says why.
	switch {
	case failing:
		return fmt.Sprintf("redis unreachable for %s; the server log says why", time.Since(renewed).Round(time.Second))
	case time.Since(renewed) > max(4*l.ttl, 10*time.Second):
		return fmt.Sprintf("redis has not answered for %s", time.Since(renewed).Round(time.Second))
	}
	return ""
}
