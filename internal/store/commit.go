package store

import (
	"sync/atomic"
	"time"
)

// CommitObserver is implemented by stores that can say how long their
// durable writes take: diskstore per group commit (Pebble apply to fsync),
// redisstore per write round trip. The engine hands it the metric
// (delayq_store_commit_seconds), so the store learns no metric names. A
// store times one commit batch with one pair of clock reads, so the
// observer costs the hot path next to nothing.
type CommitObserver interface {
	// ObserveCommits makes f receive the duration of every later commit.
	// f must be quick and safe for concurrent use; nil stops the calls.
	ObserveCommits(f func(time.Duration))
}

// CommitHook is a CommitObserver's slot for f, safe to set while commits
// run. Stores embed it.
type CommitHook struct {
	f atomic.Pointer[func(time.Duration)]
}

// ObserveCommits implements CommitObserver.
func (h *CommitHook) ObserveCommits(f func(time.Duration)) {
	if f == nil {
		h.f.Store(nil)
		return
	}
	h.f.Store(&f)
}

// Observing reports whether an observer is set, so a store skips the
// clock reads when nobody listens.
func (h *CommitHook) Observing() bool { return h.f.Load() != nil }

// Committed reports one commit that began at start.
func (h *CommitHook) Committed(start time.Time) {
	if f := h.f.Load(); f != nil {
		(*f)(time.Since(start))
	}
}
