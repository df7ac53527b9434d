package pgstore

import (
	"fmt"
	"sync"
	"time"

	"github.com/delayq/delayq/internal/store"
)

var _ store.Healther = (*Store)(nil)

// reach remembers how the last heartbeat went: the heartbeat is the
// store's probe of a primary that takes writes, every LeaseCheck.
type reach struct {
	mu      sync.Mutex
	failing bool      // the last heartbeat failed
	ok      time.Time // when a heartbeat last succeeded
}

func (r *reach) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failing = err != nil
	if err == nil {
		r.ok = time.Now()
	}
}

// Health implements store.Healther: why this instance cannot serve, or ""
// when its last heartbeat reached a primary. A heartbeat is a write, and
// with target_session_attrs=read-write a connection reaches only a
// primary, so while a failover has no primary yet (the old one dead, the
// standby not promoted) /readyz answers 503, and 200 again within a
// LeaseCheck of the promotion. A heartbeat that hangs counts as failed
// once none has succeeded for four LeaseChecks (at least 10 s).
func (s *Store) Health() string {
	if s.ctx.Err() != nil {
		return "postgres store closed"
	}
	s.reach.mu.Lock()
	failing, ok := s.reach.failing, s.reach.ok
	s.reach.mu.Unlock()
	// The body of /healthz is public: it says what; the log, with the
	// host, says why.
	switch {
	case failing:
		return fmt.Sprintf("postgres primary unreachable for %s; the server log says why", time.Since(ok).Round(time.Second))
	case time.Since(ok) > max(4*s.opt.LeaseCheck, 10*time.Second):
		return fmt.Sprintf("postgres has not answered for %s", time.Since(ok).Round(time.Second))
	}
	return ""
}
