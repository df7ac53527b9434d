// Package memstore is a simple in-memory store.Store: one mutex, two maps,
// and a sort of the matching jobs on every scan.
//
// It is the reference model of the conformance suite (package storetest)
// and the store of the engine's tests. Clarity beats speed here: every
// method is a direct reading of the contract in package store. It starts no
// goroutines, never blocks except on its mutex and never reads the clock,
// so it is safe inside testing/synctest bubbles. It keeps nothing across a
// restart and is not meant for production. A store that retains jobs
// (Options.Retention) reads its retention clock at Get, List and Put, to
// hide retained jobs that expired; that clock is time.Now unless the
// Retention says otherwise.
package memstore

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var _ store.Store = (*Store)(nil)

// defaultTickMax is how many jobs Tick moves when TickParams.Max <= 0.
const defaultTickMax = 1000

// Store is an in-memory store.Store. The zero value is not usable; call New.
type Store struct {
	mu     sync.Mutex
	closed bool                             // guarded by mu
	seq    uint64                           // last seq assigned; guarded by mu
	jobs   map[uint64]*delayq.Job           // live jobs by seq; guarded by mu
	ids    map[string]uint64                // live job id -> seq; guarded by mu
	pauses map[string]time.Time             // topic -> pause end; guarded by mu
	clock  store.Clock                      // guarded by mu
	docs   map[string]map[string]*store.Doc // kind -> name -> document (docs.go); guarded by mu
	series map[string][]*seriesRing         // topic -> one ring per store.SeriesResolutions (series.go); guarded by mu

	retention store.Retention
	kept      map[uint64]*delayq.Job // retained jobs by seq (retain.go); guarded by mu
	keptIDs   map[string]uint64      // retained job id -> seq; guarded by mu
	expiries  expiryHeap             // retained jobs by expiry; guarded by mu
}

// Options configure a Store.
type Options struct {
	// Retention is how long the store keeps the jobs it removes
	// (finished, deleted, failed); the zero value keeps none.
	Retention store.Retention
}

// New returns an empty store that keeps no removed job.
func New() *Store { return Open(Options{}) }

// Open returns an empty store configured by o.
func Open(o Options) *Store {
	return &Store{
		jobs:      make(map[uint64]*delayq.Job),
		ids:       make(map[string]uint64),
		pauses:    make(map[string]time.Time),
		retention: o.Retention,
		kept:      make(map[uint64]*delayq.Job),
		keptIDs:   make(map[string]uint64),
	}
}

var errClosed = fmt.Errorf("memstore: closed: %w", delayq.ErrUnavailable)

// lock takes the mutex and reports an error if the store is closed; on
// error the mutex is released again.
func (s *Store) lock() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	return nil
}

// Close implements store.Store.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// Put implements store.Store.
func (s *Store) Put(_ context.Context, jobs []*delayq.Job) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	seen := make(map[string]bool, len(jobs))
	var expired []uint64 // retained jobs whose ids the put takes over
	now := s.retainedNow()
	for _, j := range jobs {
		if seq, live := s.ids[j.ID]; live {
			return fmt.Errorf("memstore: put: %w", &delayq.ExistsError{ID: j.ID, State: s.jobs[seq].State})
		}
		if seq, ok := s.keptIDs[j.ID]; ok {
			if k := s.kept[seq]; s.visible(k, now) {
				return fmt.Errorf("memstore: put: %w", &delayq.ExistsError{ID: j.ID, State: k.State})
			}
			expired = append(expired, seq)
		}
		if seen[j.ID] {
			return fmt.Errorf("memstore: put: %w", &delayq.ExistsError{ID: j.ID})
		}
		seen[j.ID] = true
	}
	for _, seq := range expired {
		s.forget(seq)
	}
	for _, j := range jobs {
		s.seq++
		j.Seq = s.seq
		c := j.Clone()
		store.Truncate(c)
		s.jobs[c.Seq] = c
		s.ids[c.ID] = c.Seq
	}
	return nil
}

// find returns the live job ref names, or ErrNotFound.
func (s *Store) find(ref delayq.Ref) (*delayq.Job, error) {
	seq := ref.Seq
	if ref.ID != "" {
		var ok bool
		if seq, ok = s.ids[ref.ID]; !ok {
			return nil, fmt.Errorf("memstore: job %s: %w", ref, delayq.ErrNotFound)
		}
	}
	j, ok := s.jobs[seq]
	if !ok {
		return nil, fmt.Errorf("memstore: job %s: %w", ref, delayq.ErrNotFound)
	}
	return j, nil
}

// change runs a transition of the one job ref names: fn checks the job
// and changes it in place (or removes it), and change returns a copy of
// what fn left.
func (s *Store) change(ref delayq.Ref, fn func(j *delayq.Job) error) (*delayq.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.apply(ref, fn)
}

// apply is change under the lock. Requires mu.
func (s *Store) apply(ref delayq.Ref, fn func(j *delayq.Job) error) (*delayq.Job, error) {
	j, err := s.find(ref)
	if err != nil {
		return nil, err
	}
	if err := fn(j); err != nil {
		return nil, err
	}
	return j.Clone(), nil
}

// Get implements store.Store.
func (s *Store) Get(_ context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	j, err := s.find(ref)
	if err != nil {
		if k := s.findKept(ref); k != nil {
			return k.Clone(), nil
		}
		return nil, err
	}
	return j.Clone(), nil
}

// paused reports whether topic is paused at now.
func (s *Store) paused(topic string, now time.Time) bool {
	until, ok := s.pauses[topic]
	return ok && now.Before(until)
}

// Reserve implements store.Store.
func (s *Store) Reserve(_ context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock.At(p.Now)
	topics := make(map[string]bool, len(p.Topics))
	for _, t := range p.Topics {
		if !s.paused(t, now) {
			topics[t] = true
		}
	}
	ready := s.sorted(func(j *delayq.Job) bool {
		return topics[j.Topic] && j.State == delayq.StateReady
	})
	begin := store.BeginTTR(now, p.Now)
	out := []*delayq.Job{}
	for _, j := range ready {
		if len(out) >= p.Max {
			break
		}
		store.ApplyReserve(j, store.ReserveStart(j, begin))
		j.StartAttempt(now, p.By)
		out = append(out, j.Clone())
	}
	return out, nil
}

// ReserveJob implements store.Store.
func (s *Store) ReserveJob(_ context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckReservable(j); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		store.ApplyReserve(j, store.BeginTTR(now, p.Now))
		j.StartAttempt(now, p.By)
		return nil
	})
}

// Release implements store.Store.
func (s *Store) Release(_ context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		store.ApplyRelease(j, p, now)
		how := delayq.OutcomeReleased
		if j.State == delayq.StateBuried {
			how = delayq.OutcomeBuried
		}
		j.EndAttempt(now, how, p.Reason)
		return nil
	})
}

// Touch implements store.Store.
func (s *Store) Touch(_ context.Context, p store.TouchParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
		store.ApplyTouch(j, store.BeginTTR(s.clock.At(p.Now), p.Now))
		return nil
	})
}

// GiveBack implements store.Store.
func (s *Store) GiveBack(_ context.Context, p store.GiveBackParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
		store.ApplyGiveBack(j)
		if n := len(j.History); n > 0 {
			j.EndAttempt(j.History[n-1].Reserved, delayq.OutcomeGaveBack, "")
		}
		return nil
	})
}

// Bury implements store.Store.
func (s *Store) Bury(_ context.Context, p store.BuryParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		store.ApplyBury(j, p, now)
		j.EndAttempt(now, delayq.OutcomeBuried, p.Reason)
		return nil
	})
}

// Kick implements store.Store.
func (s *Store) Kick(_ context.Context, p store.KickParams) (int, error) {
	if err := s.lock(); err != nil {
		return 0, err
	}
	defer s.mu.Unlock()
	in := func(st delayq.State) []*delayq.Job {
		return s.sorted(func(j *delayq.Job) bool { return j.Topic == p.Topic && j.State == st })
	}
	var jobs []*delayq.Job
	switch p.State {
	case delayq.StateBuried, delayq.StateDelayed:
		jobs = in(p.State)
	case "":
		if jobs = in(delayq.StateBuried); len(jobs) == 0 {
			jobs = in(delayq.StateDelayed)
		}
	}
	n := 0
	for _, j := range jobs {
		if n >= p.Max {
			break
		}
		store.ApplyKick(j, s.clock.At(p.Now))
		n++
	}
	return n, nil
}

// KickJob implements store.Store.
func (s *Store) KickJob(_ context.Context, p store.KickJobParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckKickable(j); err != nil {
			return err
		}
		store.ApplyKick(j, s.clock.At(p.Now))
		return nil
	})
}

// Delete implements store.Store.
func (s *Store) Delete(_ context.Context, p store.DeleteParams) (*delayq.Job, error) {
	return s.change(p.Ref, s.remove(p))
}

// DeleteBatch implements store.Store.
func (s *Store) DeleteBatch(_ context.Context, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	if err := s.lock(); err != nil {
		return nil, nil, err
	}
	defer s.mu.Unlock()
	jobs, errs := make([]*delayq.Job, len(ps)), make([]error, len(ps))
	for i, p := range ps {
		jobs[i], errs[i] = s.apply(p.Ref, s.remove(p))
	}
	return jobs, errs, nil
}

// remove returns the change that deletes a job as p asks, keeping it as
// a retained job when the store retains. The job it leaves (and Delete
// returns) is the live job as the delete found it, its attempt ended.
// Requires mu when called.
func (s *Store) remove(p store.DeleteParams) func(j *delayq.Job) error {
	return func(j *delayq.Job) error {
		if err := store.CheckDeletable(j, p); err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		finished := j.State == delayq.StateReserved && p.Ref.Reservation != "" && p.Ref.Reservation == j.Reservation
		switch {
		case finished:
			j.EndAttempt(now, delayq.OutcomeFinished, "")
		case j.State == delayq.StateReserved:
			j.EndAttempt(now, delayq.OutcomeDeleted, "")
		}
		delete(s.jobs, j.Seq)
		delete(s.ids, j.ID)
		s.retain(j, finished, now)
		return nil
	}
}

// Update implements store.Store.
func (s *Store) Update(_ context.Context, p store.UpdateParams) (*delayq.Job, error) {
	return s.change(p.Ref, func(j *delayq.Job) error {
		if err := store.CheckUpdatable(j); err != nil {
			return err
		}
		var now time.Time // only a new Due acts at a time
		if p.Due != nil {
			now = s.clock.At(p.Now)
		}
		store.ApplyUpdate(j, p, now)
		return nil
	})
}

// Pause implements store.Store.
func (s *Store) Pause(_ context.Context, p store.PauseParams) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if p.Until.IsZero() {
		delete(s.pauses, p.Topic)
	} else {
		s.pauses[p.Topic] = delayq.TruncMilli(p.Until)
	}
	return nil
}

// Topics implements store.Store.
func (s *Store) Topics(_ context.Context) ([]delayq.TopicStats, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	stats := make(map[string]*delayq.TopicStats)
	get := func(name string) *delayq.TopicStats {
		if stats[name] == nil {
			stats[name] = &delayq.TopicStats{Name: name}
		}
		return stats[name]
	}
	for name, until := range s.pauses {
		get(name).PausedUntil = until
	}
	for _, j := range s.jobs {
		addStats(get(j.Topic), j)
	}
	out := make([]delayq.TopicStats, 0, len(stats))
	for _, st := range stats {
		out = append(out, *st)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// addStats counts j into st.
func addStats(st *delayq.TopicStats, j *delayq.Job) {
	switch j.State {
	case delayq.StateDelayed:
		st.Delayed++
	case delayq.StateReserved:
		st.Reserved++
	case delayq.StateBuried:
		st.Buried++
	case delayq.StateReady:
		st.Ready++
		if j.Priority < delayq.DefaultPriority {
			st.Urgent++
		}
		if st.OldestReady.IsZero() || j.Due.Before(st.OldestReady) {
			st.OldestReady = j.Due
		}
	}
}

// Tick implements store.Store. Due work is handled in the order of its time
// (Due of delayed jobs, Deadline of reserved jobs), then seq.
func (s *Store) Tick(_ context.Context, p store.TickParams) (*store.TickResult, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.clock.At(p.Now)
	limit := p.Max
	if limit <= 0 {
		limit = defaultTickMax
	}
	pending := s.pending()
	res := &store.TickResult{Ready: map[string]int{}}
	res.Expired = s.expire(now, limit)
	for len(pending) > 0 && !pendingAt(pending[0]).After(now) {
		if limit == 0 {
			res.Next = now
			return res, nil
		}
		limit--
		s.promote(pending[0], now, p.Backoff, res)
		pending = pending[1:]
	}
	if len(pending) > 0 {
		res.Next = pendingAt(pending[0])
	}
	s.backedOffNext(res, now)
	if next := s.nextExpiry(); !next.IsZero() && (res.Next.IsZero() || next.Before(res.Next)) {
		res.Next = next
		if next.Before(now) {
			res.Next = now
		}
	}
	return res, nil
}

// backedOffNext lowers res.Next to the due time of a job this Tick backed
// off (it was not among the pending jobs Tick started from), or to the
// latest time acted at when one is due already.
func (s *Store) backedOffNext(res *store.TickResult, now time.Time) {
	if res.BackedOff == 0 {
		return
	}
	for _, j := range s.jobs {
		if j.State == delayq.StateDelayed && (res.Next.IsZero() || j.Due.Before(res.Next)) {
			res.Next = j.Due
		}
	}
	if res.Next.Before(now) {
		res.Next = now
	}
}

// pending returns the delayed and reserved jobs in the order Tick handles
// them.
func (s *Store) pending() []*delayq.Job {
	var out []*delayq.Job
	for _, j := range s.jobs {
		if j.State == delayq.StateDelayed || j.State == delayq.StateReserved {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool {
		ta, tb := pendingAt(out[a]), pendingAt(out[b])
		if !ta.Equal(tb) {
			return ta.Before(tb)
		}
		return out[a].Seq < out[b].Seq
	})
	return out
}

// pendingAt is when Tick must act on a delayed or reserved job.
func pendingAt(j *delayq.Job) time.Time {
	if j.State == delayq.StateReserved {
		return j.Deadline
	}
	return j.Due
}

// promote makes one due job ready (or buried when a TTR ran out on its
// last attempt) and records it in res.
func (s *Store) promote(j *delayq.Job, now time.Time, bs map[string]store.Backoff, res *store.TickResult) {
	if j.State == delayq.StateDelayed {
		store.ApplyDue(j)
		res.AddLateness(j.Topic, now.Sub(j.Due))
	} else {
		deadline := j.Deadline
		backedOff := store.ApplyTimeoutBackoff(j, bs)
		how := delayq.OutcomeTTRExpired
		if j.State == delayq.StateBuried {
			how = delayq.OutcomeBuried
		}
		j.EndAttempt(deadline, how, delayq.ReasonTTRExpired)
		if backedOff {
			res.AddBackedOff(j.Topic)
			return
		}
	}
	if j.State == delayq.StateBuried {
		res.AddBuried(j.Topic)
		return
	}
	res.Ready[j.Topic]++
}

// sorted returns the jobs matching keep, in List order (see key).
func (s *Store) sorted(keep func(*delayq.Job) bool) []*delayq.Job {
	var out []*delayq.Job
	for _, j := range s.jobs {
		if keep(j) {
			out = append(out, j)
		}
	}
	sortByKey(out)
	return out
}

// sortByKey sorts jobs in List order.
func sortByKey(jobs []*delayq.Job) {
	sort.Slice(jobs, func(a, b int) bool { return key(jobs[a]).less(key(jobs[b])) })
}

// listKey orders jobs as List serves them: state rank, then the state's own
// order, then seq. It is also the cursor, so a page resumes after the last
// job shown even if that job has since moved.
type listKey struct {
	rank int
	at   int64
	seq  uint64
}

func (k listKey) less(o listKey) bool {
	if k.rank != o.rank {
		return k.rank < o.rank
	}
	if k.at != o.at {
		return k.at < o.at
	}
	return k.seq < o.seq
}

func (k listKey) String() string {
	return fmt.Sprintf("%d/%d/%d", k.rank, k.at, k.seq)
}

func parseKey(s string) (listKey, error) {
	var k listKey
	parts := strings.Split(s, "/")
	if len(parts) != 3 {
		return k, delayq.Invalid(delayq.CodeBadCursor, "cursor", "%q is not a cursor", s)
	}
	var errs [3]error
	k.rank, errs[0] = strconv.Atoi(parts[0])
	k.at, errs[1] = strconv.ParseInt(parts[1], 10, 64)
	k.seq, errs[2] = strconv.ParseUint(parts[2], 10, 64)
	for _, err := range errs {
		if err != nil {
			return k, delayq.Invalid(delayq.CodeBadCursor, "cursor", "%q is not a cursor", s)
		}
	}
	return k, nil
}

// key is j's place in List order. Retained jobs, listed only by their
// own state, go by Ended then seq.
func key(j *delayq.Job) listKey {
	switch j.State {
	case delayq.StateFinished, delayq.StateDeleted, delayq.StateFailed:
		return listKey{4, j.Ended.UnixMilli(), j.Seq}
	case delayq.StateReady:
		return listKey{0, int64(j.Priority), j.Seq}
	case delayq.StateDelayed:
		return listKey{1, j.Due.UnixMilli(), j.Seq}
	case delayq.StateReserved:
		return listKey{2, j.Deadline.UnixMilli(), j.Seq}
	default:
		return listKey{3, j.Due.UnixMilli(), j.Seq}
	}
}

// List implements store.Store.
func (s *Store) List(_ context.Context, p store.ListParams) (*store.ListResult, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var after *listKey
	if p.Cursor != "" {
		k, err := parseKey(p.Cursor)
		if err != nil {
			return nil, err
		}
		after = &k
	}
	var jobs []*delayq.Job
	if p.State.Retained() {
		jobs = s.listKept(p.Topic, p.State, after)
	} else {
		jobs = s.sorted(func(j *delayq.Job) bool {
			return j.Topic == p.Topic && (p.State == "" || j.State == p.State) &&
				(after == nil || after.less(key(j)))
		})
	}
	res := &store.ListResult{Jobs: []*delayq.Job{}}
	for _, j := range jobs {
		if p.Limit > 0 && len(res.Jobs) == p.Limit {
			res.Next = key(res.Jobs[len(res.Jobs)-1]).String()
			break
		}
		res.Jobs = append(res.Jobs, j.Clone())
	}
	return res, nil
}
