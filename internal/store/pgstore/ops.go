package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// defaultTickMax is how many jobs Tick moves when TickParams.Max <= 0.
const defaultTickMax = 1000

// Put implements store.Store: the call joins a group of concurrent
// calls written in one transaction (group.go), and returns once that
// transaction committed, with its own answer.
func (s *Store) Put(ctx context.Context, jobs []*delayq.Job) error {
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if seen[j.ID] {
			return fmt.Errorf("pgstore: put: %w", &delayq.ExistsError{ID: j.ID})
		}
		seen[j.ID] = true
	}
	if err := s.check(); err != nil || len(jobs) == 0 {
		return err
	}
	return s.putGrouped(ctx, &putCall{jobs: jobs})
}

// putAlone writes one call's jobs in a transaction of their own: one
// round trip, a pipeline of statements that Postgres runs as one
// implicit transaction: free the ids of retained jobs whose retention
// ran out, then insert every job with its seq. A taken id fails the
// insert, and with it the whole put. A group that failed on one bad row
// writes its calls this way (group.go).
func (s *Store) putAlone(ctx context.Context, jobs []*delayq.Job) error {
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	retNow := s.opt.Retention.Clock()()
	n := len(jobs)
	var (
		aPrio, aDelay, aTTR = make([]int64, n), make([]int64, n), make([]int64, n)
		aTopic, aState      = make([]string, n), make([]string, n)
		aDue, aCreated      = make([]time.Time, n), make([]time.Time, n)
		aMax                = make([]int32, n)
		aBody               = make([][]byte, n)
	)
	for i, j := range jobs {
		aPrio[i] = int64(j.Priority)
		aDelay[i], aTTR[i] = msOf(j.Delay), msOf(j.TTR)
		aTopic[i], aState[i] = j.Topic, string(j.State)
		aDue[i], aCreated[i] = delayq.TruncMilli(j.Due).UTC(), delayq.TruncMilli(j.Created).UTC()
		aMax[i] = int32(j.MaxAttempts)
		aBody[i] = j.Body
		if aBody[i] == nil {
			aBody[i] = []byte{}
		}
	}
	start := time.Now()
	b := &pgx.Batch{}
	if s.opt.Retention.For > 0 {
		b.Queue(s.q.putDelete, ids, retNow)
	}
	seqs := make(map[string]uint64, n)
	b.Queue(s.q.putInsert, ids, aTopic, aState, aPrio, aDue, aCreated, aDelay, aTTR, aMax, aBody).Query(func(rows pgx.Rows) error {
		var id string
		var seq int64
		_, err := pgx.ForEachRow(rows, []any{&id, &seq}, func() error {
			seqs[id] = uint64(seq)
			return nil
		})
		return err
	})
	// After the insert: a taken id fails the insert and ends the
	// implicit transaction before the counts change.
	c := counter{}
	for _, j := range jobs {
		c.add(countOf(j), 1)
	}
	c.queue(b, &s.q)
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && pe.Code == "23505" {
			return s.taken(ctx, ids, retNow)
		}
		return s.fail("put", err)
	}
	s.CommitHook.Committed(start)
	for _, j := range jobs {
		j.Seq = seqs[j.ID]
	}
	s.ring(jobs...)
	return nil
}

// taken builds the ExistsError of a put that failed on a taken id: the
// first of ids taken now, with its job's state.
func (s *Store) taken(ctx context.Context, ids []string, retNow time.Time) error {
	rows, err := s.pool.Query(ctx, s.q.putTaken, ids, retNow)
	if err != nil {
		return s.fail("put", err)
	}
	states := map[string]string{}
	var id, state string
	if _, err := pgx.ForEachRow(rows, []any{&id, &state}, func() error {
		states[id] = state
		return nil
	}); err != nil {
		return s.fail("put", err)
	}
	for _, id := range ids {
		if st, ok := states[id]; ok {
			return fmt.Errorf("pgstore: put: %w", &delayq.ExistsError{ID: id, State: delayq.State(st)})
		}
	}
	// The job that held the id ended and expired in between: report the
	// first id, as a put that lost a race would have.
	return fmt.Errorf("pgstore: put: %w", &delayq.ExistsError{ID: ids[0]})
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	retNow := s.opt.Retention.Clock()()
	var row pgx.Row
	switch {
	case ref.ID != "":
		row = s.pool.QueryRow(ctx, s.q.getByID, ref.ID, retNow)
	case ref.Seq != 0:
		row = s.pool.QueryRow(ctx, s.q.getBySeq, int64(ref.Seq), retNow)
	default:
		return nil, fmt.Errorf("pgstore: job %s: %w", ref, delayq.ErrNotFound)
	}
	j, err := scanJob(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: job %s: %w", ref, delayq.ErrNotFound)
	}
	if err != nil {
		return nil, s.fail("get", err)
	}
	return j, nil
}

// Reserve implements store.Store.
func (s *Store) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	now := s.at(p.Now)
	begin := store.BeginTTR(now, p.Now)
	topics := slices.Compact(slices.Sorted(slices.Values(p.Topics)))
	out := []*delayq.Job{}
	if p.Max <= 0 || len(topics) == 0 {
		return out, s.check()
	}
	var jobs []*delayq.Job
	err := s.pipeTx(ctx, "reserve", func(b *pgx.Batch) {
		b.Queue(s.q.reserve, topics, p.Max, now).Query(func(rows pgx.Rows) (err error) {
			jobs, err = scanJobs(rows)
			return err
		})
	}, func(b *pgx.Batch) error {
		c := counter{}
		var v saver
		for _, j := range jobs {
			before := countOf(j)
			store.ApplyReserve(j, store.ReserveStart(j, begin))
			j.StartAttempt(now, p.By)
			v.add(j)
			c.move(before, j)
		}
		v.queue(b, &s.q)
		c.queue(b, &s.q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	if jobs != nil {
		out = jobs
	}
	s.ring(out...)
	return out, nil
}

// querier is a pool or a transaction.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// queryJobs runs a query of jobCols rows and reads them all.
func queryJobs(ctx context.Context, q querier, sql string, args ...any) ([]*delayq.Job, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return scanJobs(rows)
}

// ReserveJob implements store.Store.
func (s *Store) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	now := s.at(p.Now)
	return s.change(ctx, "reserve job", p.Ref, func(j *delayq.Job) error {
		if err := store.CheckReservable(j); err != nil {
			return err
		}
		store.ApplyReserve(j, store.BeginTTR(now, p.Now))
		j.StartAttempt(now, p.By)
		return nil
	})
}

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	now := s.at(p.Now)
	return s.change(ctx, "release", p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
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
func (s *Store) Touch(ctx context.Context, p store.TouchParams) (*delayq.Job, error) {
	now := s.at(p.Now)
	return s.change(ctx, "touch", p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
		store.ApplyTouch(j, store.BeginTTR(now, p.Now))
		return nil
	})
}

// GiveBack implements store.Store.
func (s *Store) GiveBack(ctx context.Context, p store.GiveBackParams) (*delayq.Job, error) {
	return s.change(ctx, "give back", p.Ref, func(j *delayq.Job) error {
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
func (s *Store) Bury(ctx context.Context, p store.BuryParams) (*delayq.Job, error) {
	now := s.at(p.Now)
	return s.change(ctx, "bury", p.Ref, func(j *delayq.Job) error {
		if err := store.CheckHeld(j, p.Ref); err != nil {
			return err
		}
		store.ApplyBury(j, p, now)
		j.EndAttempt(now, delayq.OutcomeBuried, p.Reason)
		return nil
	})
}

// Kick implements store.Store.
func (s *Store) Kick(ctx context.Context, p store.KickParams) (int, error) {
	if p.Max <= 0 || (p.State != "" && p.State != delayq.StateBuried && p.State != delayq.StateDelayed) {
		return 0, s.check()
	}
	now := s.at(p.Now)
	n := 0
	var kicked []*delayq.Job
	err := s.tx(ctx, "kick", func(tx pgx.Tx) error {
		var jobs []*delayq.Job
		var err error
		if p.State != delayq.StateDelayed { // buried, or "" (beanstalkd's rule: buried first)
			if jobs, err = queryJobs(ctx, tx, s.q.kickBuried, p.Topic, p.Max); err != nil {
				return err
			}
		}
		if p.State == delayq.StateDelayed || (p.State == "" && len(jobs) == 0) {
			if jobs, err = queryJobs(ctx, tx, s.q.kickDelayed, p.Topic, p.Max); err != nil {
				return err
			}
		}
		b := &pgx.Batch{}
		c := counter{}
		var v saver
		for _, j := range jobs {
			before := countOf(j)
			store.ApplyKick(j, now)
			v.add(j)
			c.move(before, j)
		}
		v.queue(b, &s.q)
		c.queue(b, &s.q)
		n = len(jobs)
		kicked = jobs
		return tx.SendBatch(ctx, b).Close()
	})
	if err == nil {
		s.ring(kicked...)
	}
	return n, err
}

// KickJob implements store.Store.
func (s *Store) KickJob(ctx context.Context, p store.KickJobParams) (*delayq.Job, error) {
	now := s.at(p.Now)
	return s.change(ctx, "kick job", p.Ref, func(j *delayq.Job) error {
		if err := store.CheckKickable(j); err != nil {
			return err
		}
		store.ApplyKick(j, now)
		return nil
	})
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, p store.DeleteParams) (*delayq.Job, error) {
	jobs, errs, err := s.deleteJobs(ctx, "delete", []store.DeleteParams{p})
	if err != nil {
		return nil, err
	}
	return jobs[0], errs[0]
}

// DeleteBatch implements store.Store: one transaction, each entry
// checked on its own.
func (s *Store) DeleteBatch(ctx context.Context, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	return s.deleteJobs(ctx, "delete batch", ps)
}

// deleteJobs deletes the jobs ps name, or keeps them as retained jobs
// when the store retains, in one transaction of two round trips: it
// returns each job as the delete found it, its attempt ended, or the
// entry's own error. A batch reads its jobs with one statement and
// removes (or retains) them with one more, whatever its size: a
// statement per job was most of a finish's cost in Postgres.
func (s *Store) deleteJobs(ctx context.Context, op string, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	jobs, errs := make([]*delayq.Job, len(ps)), make([]error, len(ps))
	err := s.pipeTx(ctx, op, func(b *pgx.Batch) {
		if len(ps) == 1 {
			s.queueFind(b, ps[0].Ref, func(j *delayq.Job, err error) { jobs[0], errs[0] = j, err })
			return
		}
		s.queueFindMany(b, ps, jobs, errs)
	}, func(b *pgx.Batch) error {
		gone := map[uint64]bool{} // a job named twice is gone the second time
		c := counter{}
		var rm removal
		for i, p := range ps {
			if errs[i] == nil && gone[jobs[i].Seq] {
				errs[i] = fmt.Errorf("pgstore: job %s: %w", p.Ref, delayq.ErrNotFound)
			}
			var before jobCount
			if errs[i] == nil {
				before = countOf(jobs[i])
				errs[i] = rm.add(jobs[i], p, s.at(p.Now), s.opt.Retention)
			}
			if errs[i] != nil {
				jobs[i] = nil
				continue
			}
			gone[jobs[i].Seq] = true
			c.add(before, -1) // deleted, or retained: no longer live
		}
		rm.queue(b, &s.q, s.opt.Retention)
		c.queue(b, &s.q)
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return jobs, errs, nil
}

// queueFindMany queues the locking read of the live jobs ps name, in
// seq order (so concurrent batches lock in one order), and fills jobs
// with them, or errs with ErrNotFound.
func (s *Store) queueFindMany(b *pgx.Batch, ps []store.DeleteParams, jobs []*delayq.Job, errs []error) {
	var ids []string
	var seqs []int64
	for _, p := range ps {
		if p.Ref.ID != "" {
			ids = append(ids, p.Ref.ID)
		} else if p.Ref.Seq != 0 {
			seqs = append(seqs, int64(p.Ref.Seq))
		}
	}
	b.Queue(s.q.findMany, ids, seqs).Query(func(rows pgx.Rows) error {
		found, err := scanJobs(rows)
		if err != nil {
			return err
		}
		byID := make(map[string]*delayq.Job, len(found))
		bySeq := make(map[uint64]*delayq.Job, len(found))
		for _, j := range found {
			byID[j.ID], bySeq[j.Seq] = j, j
		}
		for i, p := range ps {
			j := bySeq[p.Ref.Seq]
			if p.Ref.ID != "" {
				j = byID[p.Ref.ID]
			}
			if j == nil {
				errs[i] = fmt.Errorf("pgstore: job %s: %w", p.Ref, delayq.ErrNotFound)
				continue
			}
			jobs[i] = j
		}
		return nil
	})
}

// removal gathers the jobs a delete removes, or retains, for one
// statement.
type removal struct {
	seqs           []int64
	states         []string
	ended, expires []time.Time
	history        [][]byte
}

// add checks that p may delete j, ends j's attempt, and adds j.
func (r *removal) add(j *delayq.Job, p store.DeleteParams, now time.Time, keep store.Retention) error {
	if err := store.CheckDeletable(j, p); err != nil {
		return err
	}
	finished := j.State == delayq.StateReserved && p.Ref.Reservation != "" && p.Ref.Reservation == j.Reservation
	switch {
	case finished:
		j.EndAttempt(now, delayq.OutcomeFinished, "")
	case j.State == delayq.StateReserved:
		j.EndAttempt(now, delayq.OutcomeDeleted, "")
	}
	r.seqs = append(r.seqs, int64(j.Seq))
	if keep.For > 0 {
		r.states = append(r.states, string(delayq.EndedState(j.State, finished)))
		r.ended = append(r.ended, now)
		r.expires = append(r.expires, now.Add(keep.For))
		r.history = append(r.history, historyJSON(j.History))
	}
	return nil
}

// queue queues the removal of the jobs added, or their keeping as
// retained jobs when the store retains.
func (r *removal) queue(b *pgx.Batch, q *queries, keep store.Retention) {
	switch {
	case len(r.seqs) == 0:
	case keep.For <= 0:
		b.Queue(q.removeMany, r.seqs)
	default:
		b.Queue(q.retainMany, r.seqs, r.states, r.ended, r.expires, r.history, keep.Bodies)
	}
}

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, p store.UpdateParams) (*delayq.Job, error) {
	var now time.Time // only a new Due acts at a time
	if p.Due != nil {
		now = s.at(p.Now)
	}
	return s.change(ctx, "update", p.Ref, func(j *delayq.Job) error {
		if err := store.CheckUpdatable(j); err != nil {
			return err
		}
		store.ApplyUpdate(j, p, now)
		return nil
	})
}

// Pause implements store.Store.
func (s *Store) Pause(ctx context.Context, p store.PauseParams) error {
	return s.tx(ctx, "pause", func(tx pgx.Tx) error {
		var err error
		if p.Until.IsZero() {
			_, err = tx.Exec(ctx, s.q.unpause, p.Topic)
		} else {
			_, err = tx.Exec(ctx, s.q.pause, p.Topic, delayq.TruncMilli(p.Until).UTC())
		}
		return err
	})
}

// Topics implements store.Store: the sums of the counts table's rows
// (counts.go), O(topics), and one index probe per topic with ready jobs
// for its oldest.
func (s *Store) Topics(ctx context.Context) ([]delayq.TopicStats, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	stats := map[string]*delayq.TopicStats{}
	get := func(name string) *delayq.TopicStats {
		if stats[name] == nil {
			stats[name] = &delayq.TopicStats{Name: name}
		}
		return stats[name]
	}
	rows, err := s.pool.Query(ctx, "SELECT topic, until FROM "+pgx.Identifier{s.opt.Schema}.Sanitize()+".pauses")
	if err != nil {
		return nil, s.fail("topics", err)
	}
	for rows.Next() {
		var name string
		var until time.Time
		if err := rows.Scan(&name, &until); err != nil {
			rows.Close()
			return nil, s.fail("topics", err)
		}
		get(name).PausedUntil = until.UTC()
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("topics", err)
	}
	rows, err = s.pool.Query(ctx, s.q.topics)
	if err != nil {
		return nil, s.fail("topics", err)
	}
	for rows.Next() {
		var st delayq.TopicStats
		if err := scanStats(rows, &st); err != nil {
			rows.Close()
			return nil, s.fail("topics", err)
		}
		got := get(st.Name)
		st.PausedUntil = got.PausedUntil
		*got = st
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("topics", err)
	}
	out := make([]delayq.TopicStats, 0, len(stats))
	for _, st := range stats {
		out = append(out, *st)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	return out, nil
}

// TopicStats implements store.TopicStater: one topic's rows of counts,
// and one index probe for its oldest ready job.
func (s *Store) TopicStats(ctx context.Context, topic string) (delayq.TopicStats, error) {
	st := delayq.TopicStats{Name: topic}
	if err := s.check(); err != nil {
		return st, err
	}
	var until time.Time
	err := s.pool.QueryRow(ctx, "SELECT until FROM "+pgx.Identifier{s.opt.Schema}.Sanitize()+".pauses WHERE topic = $1", topic).Scan(&until)
	switch {
	case err == nil:
		st.PausedUntil = until.UTC()
	case !errors.Is(err, pgx.ErrNoRows):
		return st, s.fail("topic stats", err)
	}
	paused := st.PausedUntil
	err = scanStats(s.pool.QueryRow(ctx, s.q.topicStats, topic), &st)
	switch {
	case errors.Is(err, pgx.ErrNoRows): // no live job
		st = delayq.TopicStats{Name: topic}
	case err != nil:
		return st, s.fail("topic stats", err)
	}
	st.PausedUntil = paused
	return st, nil
}

// scanStats reads a row of q.topics into st.
func scanStats(row pgx.Row, st *delayq.TopicStats) error {
	var ready, delayed, reserved, buried, urgent int64
	var oldest *time.Time
	if err := row.Scan(&st.Name, &ready, &delayed, &reserved, &buried, &urgent, &oldest); err != nil {
		return err
	}
	st.Ready, st.Delayed, st.Reserved, st.Buried, st.Urgent = int(ready), int(delayed), int(reserved), int(buried), int(urgent)
	st.OldestReady = fromPtr(oldest)
	return nil
}

// listKey is a job's place in List order, and the cursor (as memstore's).
type listKey struct {
	rank int
	at   int64
	seq  uint64
}

func (k listKey) String() string { return fmt.Sprintf("%d/%d/%d", k.rank, k.at, k.seq) }

func parseKey(s string) (listKey, error) {
	var k listKey
	parts := strings.Split(s, "/")
	bad := delayq.Invalid(delayq.CodeBadCursor, "cursor", "%q is not a cursor", s)
	if len(parts) != 3 {
		return k, bad
	}
	var errs [3]error
	k.rank, errs[0] = strconv.Atoi(parts[0])
	k.at, errs[1] = strconv.ParseInt(parts[1], 10, 64)
	k.seq, errs[2] = strconv.ParseUint(parts[2], 10, 64)
	for _, err := range errs {
		if err != nil {
			return k, bad
		}
	}
	if k.rank < 0 || k.rank > 4 {
		return k, bad
	}
	return k, nil
}

var rankOf = map[delayq.State]int{delayq.StateReady: 0, delayq.StateDelayed: 1, delayq.StateReserved: 2, delayq.StateBuried: 3}

func keyOf(j *delayq.Job) listKey {
	switch j.State {
	case delayq.StateReady:
		return listKey{0, int64(j.Priority), j.Seq}
	case delayq.StateDelayed:
		return listKey{1, j.Due.UnixMilli(), j.Seq}
	case delayq.StateReserved:
		return listKey{2, j.Deadline.UnixMilli(), j.Seq}
	case delayq.StateBuried:
		return listKey{3, j.Due.UnixMilli(), j.Seq}
	}
	return listKey{4, j.Ended.UnixMilli(), j.Seq}
}

// List implements store.Store: keyset pages through the state's index.
func (s *Store) List(ctx context.Context, p store.ListParams) (*store.ListResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	after := listKey{rank: -1}
	if p.Cursor != "" {
		k, err := parseKey(p.Cursor)
		if err != nil {
			return nil, err
		}
		after = k
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 1 << 30
	}
	want := limit + 1 // one more tells whether there is a next page
	var jobs []*delayq.Job
	ranks := []int{0, 1, 2, 3}
	if p.State != "" {
		r, ok := rankOf[p.State]
		if p.State.Retained() {
			r, ok = 4, true
		}
		if !ok {
			return &store.ListResult{Jobs: []*delayq.Job{}}, nil
		}
		ranks = []int{r}
	}
	for _, r := range ranks {
		if r < after.rank || len(jobs) >= want {
			continue
		}
		var fromAt, fromSeq int64 = -1 << 62, -1
		if r == after.rank {
			fromAt, fromSeq = after.at, int64(after.seq)
		}
		var page []*delayq.Job
		var err error
		atArg := func() any { return time.UnixMilli(fromAt).UTC() }
		if fromAt == -1<<62 {
			atArg = func() any { return time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC) }
		}
		switch r {
		case 0:
			page, err = queryJobs(ctx, s.pool, s.q.listReady, p.Topic, fromAt, fromSeq, want-len(jobs))
		case 1:
			page, err = queryJobs(ctx, s.pool, s.q.listDelayed, p.Topic, atArg(), fromSeq, want-len(jobs))
		case 2:
			page, err = queryJobs(ctx, s.pool, s.q.listReserved, p.Topic, atArg(), fromSeq, want-len(jobs))
		case 3:
			page, err = queryJobs(ctx, s.pool, s.q.listBuried, p.Topic, atArg(), fromSeq, want-len(jobs))
		case 4:
			page, err = queryJobs(ctx, s.pool, s.q.listRetired, p.Topic, atArg(), fromSeq, want-len(jobs), string(p.State), s.opt.Retention.Clock()())
		}
		if err != nil {
			return nil, s.fail("list", err)
		}
		jobs = append(jobs, page...)
	}
	res := &store.ListResult{Jobs: []*delayq.Job{}}
	if len(jobs) > limit {
		jobs = jobs[:limit]
		res.Next = keyOf(jobs[limit-1]).String()
	}
	res.Jobs = append(res.Jobs, jobs...)
	return res, nil
}
