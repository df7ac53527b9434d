package memstore

import (
	"container/heap"
	"time"

	"github.com/delayq/delayq"
)

// Retained jobs (see the Retention bullet of store.Store): a job that a
// delete removes while the store retains moves from jobs/ids to
// kept/keptIDs, and its expiry goes into a heap, so Tick removes what
// expired without looking at what is still kept.

// expiresAt is when retained job k stops being readable.
func (s *Store) expiresAt(k *delayq.Job) time.Time { return k.Ended.Add(s.retention.For) }

// retainedNow reads the retention clock once for a read that must hide
// expired retained jobs; zero when the store keeps none (no read needed).
func (s *Store) retainedNow() time.Time {
	if len(s.kept) == 0 {
		return time.Time{}
	}
	return s.retention.Clock()()
}

// visible reports whether retained job k (nil: none) is still readable at
// now (retainedNow).
func (s *Store) visible(k *delayq.Job, now time.Time) bool {
	return k != nil && now.Before(s.expiresAt(k))
}

// findKept returns the readable retained job ref names, or nil. Requires
// mu.
func (s *Store) findKept(ref delayq.Ref) *delayq.Job {
	seq := ref.Seq
	if ref.ID != "" {
		var ok bool
		if seq, ok = s.keptIDs[ref.ID]; !ok {
			return nil
		}
	}
	if k := s.kept[seq]; s.visible(k, s.retainedNow()) {
		return k
	}
	return nil
}

// retain keeps j, just removed from the live jobs at now, as a retained
// job when the store retains: in its ended state, without reservation,
// and without body unless the retention keeps bodies. j itself is left
// as it was (Delete returns it). Requires mu.
func (s *Store) retain(j *delayq.Job, finished bool, now time.Time) {
	if s.retention.For <= 0 {
		return
	}
	k := j.Clone()
	k.State = delayq.EndedState(j.State, finished)
	k.Ended = now
	k.Reservation, k.Deadline = "", time.Time{}
	if !s.retention.Bodies {
		k.Body = nil
	}
	s.kept[k.Seq] = k
	s.keptIDs[k.ID] = k.Seq
	heap.Push(&s.expiries, expiry{at: s.expiresAt(k), seq: k.Seq})
}

// forget drops retained job seq (its heap entry goes when it surfaces).
// Requires mu.
func (s *Store) forget(seq uint64) {
	if k, ok := s.kept[seq]; ok {
		delete(s.kept, seq)
		delete(s.keptIDs, k.ID)
	}
}

// expire removes up to limit retained jobs whose retention ended at or
// before now, earliest first, and returns how many it removed. Requires
// mu.
func (s *Store) expire(now time.Time, limit int) int {
	n := 0
	for n < limit {
		next := s.nextExpiry()
		if next.IsZero() || next.After(now) {
			break
		}
		s.forget(heap.Pop(&s.expiries).(expiry).seq)
		n++
	}
	return n
}

// nextExpiry is the earliest retention end still kept; zero when none.
// It drops heap entries of retained jobs already forgotten. Requires mu.
func (s *Store) nextExpiry() time.Time {
	for s.expiries.Len() > 0 {
		top := s.expiries[0]
		if _, ok := s.kept[top.seq]; ok {
			return top.at
		}
		heap.Pop(&s.expiries)
	}
	return time.Time{}
}

// listKept returns topic's readable retained jobs in state, in List
// order (Ended, then Seq), after the cursor key after (nil: from the
// start). Requires mu.
func (s *Store) listKept(topic string, state delayq.State, after *listKey) []*delayq.Job {
	now := s.retainedNow()
	var out []*delayq.Job
	for _, k := range s.kept {
		if k.Topic == topic && k.State == state && s.visible(k, now) && (after == nil || after.less(key(k))) {
			out = append(out, k)
		}
	}
	sortByKey(out)
	return out
}

// expiry is one retained job's place in the expiry heap.
type expiry struct {
	at  time.Time
	seq uint64
}

// expiryHeap orders retained jobs by expiry, then seq (container/heap).
type expiryHeap []expiry

func (h expiryHeap) Len() int { return len(h) }
func (h expiryHeap) Less(a, b int) bool {
	if !h[a].at.Equal(h[b].at) {
		return h[a].at.Before(h[b].at)
	}
	return h[a].seq < h[b].seq
}
func (h expiryHeap) Swap(a, b int) { h[a], h[b] = h[b], h[a] }
func (h *expiryHeap) Push(x any)   { *h = append(*h, x.(expiry)) }
func (h *expiryHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
