package pgstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/delayq/delayq"
)

// Group insert.
//
// Concurrent Put calls are written together: one statement, one
// transaction, one durable commit for many calls. A put on a 2-core
// machine spent most of its cost on things paid once per transaction
// (the round trip's writes and wake-ups on both sides, Postgres's
// transaction start and commit, the WAL flush), not per row.
//
// At most groupsInFlight groups are written at a time. A call that finds
// a free slot writes itself at once, in its own goroutine, as a group of
// one: a lone put waits for nobody, and there is no timer. A call that
// finds every slot busy waits in line; when a group commits, the calls
// waiting by then (up to the limits below) go out as the next group,
// written by a goroutine started for it, while the finished group's
// callers return. So a group gathers exactly what arrived while the one
// before it was in flight.
//
// Each call keeps its own answer. The group statement (putGroup) looks
// up every id first and leaves out the whole call of a taken id, which
// gets its *delayq.ExistsError with the taken job's state from that
// lookup; the other calls' jobs go in. Two calls with the same id are
// never in one group: the later one waits for the next group, which sees
// the first one's job. Every job a group inserts commits in its one
// transaction with its counts (counts.go), its seqs follow the order the
// calls were taken in, and no call returns before that commit. A
// statement error that one bad row can cause (a constraint's, or a
// concurrent insert of the same id by another instance or an
// application's transaction) fails the whole group, which is then
// written again one call per transaction (putAlone), so a bad row fails
// only its own call.

// groupsInFlight is how many groups are written at a time. One keeps
// seq order equal to commit order across the instance's puts; two, with
// 32 producers on two cores, were no faster and spent more CPU per put
// on smaller groups (docs/benchmarks.md).
const groupsInFlight = 1

// maxGroupJobs bounds the jobs of one group statement: its arrays, its
// statement time, and what one failed group writes again call by call.
// Gathering stops there (a call of more jobs than that goes alone); 256
// is far above what 32 concurrent producers gather per commit (15 to 20
// on two cores), past the point where a bigger group saves anything per
// job.
const maxGroupJobs = 256

// maxGroupBody bounds the body bytes of one group (a call with more
// goes alone): with bodies of up to --max-body each, a group of
// maxGroupJobs could otherwise make one message of hundreds of MiB.
const maxGroupBody = 4 << 20

// putCall is one Put waiting for its group's commit.
type putCall struct {
	jobs []*delayq.Job
	body int           // body bytes
	err  error         // the call's answer, set before done closes
	done chan struct{} // closed once answered
}

// putLine gathers the calls that wait for a slot.
type putLine struct {
	mu       sync.Mutex
	waiting  []*putCall // in arrival order; guarded by mu
	inflight int        // groups being written; guarded by mu
}

// putGrouped writes c through a group and returns its answer. A caller
// whose ctx ends while it waits in line leaves it, unwritten; once its
// group is being written it gets ctx's error at once, not an
// acknowledgement (the group may still commit its jobs, as a put cut off
// while its commit is on the wire may).
func (s *Store) putGrouped(ctx context.Context, c *putCall) error {
	for _, j := range c.jobs {
		c.body += len(j.Body)
	}
	l := &s.line
	l.mu.Lock()
	if l.inflight < groupsInFlight {
		l.inflight++
		l.mu.Unlock()
		s.writeGroup([]*putCall{c})
		return c.err
	}
	c.done = make(chan struct{})
	l.waiting = append(l.waiting, c)
	l.mu.Unlock()
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
	}
	l.mu.Lock()
	if i := slices.Index(l.waiting, c); i >= 0 {
		l.waiting = slices.Delete(l.waiting, i, i+1)
	}
	l.mu.Unlock()
	select {
	case <-c.done: // answered meanwhile
		return c.err
	default:
		return fmt.Errorf("pgstore: put: %w", ctx.Err())
	}
}

// writeGroup writes one group in the slot its caller holds, answers its
// calls, and hands the slot on: to the calls that waited meanwhile, in a
// goroutine of their own, or back to the line.
func (s *Store) writeGroup(calls []*putCall) {
	s.writeCalls(calls)
	for _, c := range calls {
		if c.done != nil {
			close(c.done)
		}
	}
	l := &s.line
	l.mu.Lock()
	next := l.take()
	if len(next) == 0 {
		l.inflight--
	}
	l.mu.Unlock()
	if len(next) > 0 {
		go s.writeGroup(next)
	}
}

// take removes from the front of the line the calls of the next group:
// in arrival order, up to maxGroupJobs jobs and maxGroupBody bytes (the
// first call whatever its size), stopping before a call that repeats an
// id of the group. Requires mu.
func (l *putLine) take() []*putCall {
	if len(l.waiting) == 0 {
		return nil
	}
	ids := map[string]bool{}
	jobs, body, n := 0, 0, 0
	for _, c := range l.waiting {
		if n > 0 && (jobs+len(c.jobs) > maxGroupJobs || body+c.body > maxGroupBody) {
			break
		}
		clash := false
		for _, j := range c.jobs {
			clash = clash || ids[j.ID]
		}
		if clash {
			break
		}
		for _, j := range c.jobs {
			ids[j.ID] = true
		}
		jobs, body, n = jobs+len(c.jobs), body+c.body, n+1
	}
	out := make([]*putCall, n)
	copy(out, l.waiting)
	rest := copy(l.waiting, l.waiting[n:])
	clear(l.waiting[rest:])
	l.waiting = l.waiting[:rest]
	return out
}

// writeCalls writes a group's calls in one transaction (one round trip:
// the implicit transaction of a pipeline) and sets each call's answer;
// on an error one row can cause, it writes them again one by one.
func (s *Store) writeCalls(calls []*putCall) {
	if err := s.check(); err != nil {
		for _, c := range calls {
			c.err = err
		}
		return
	}
	ctx := s.ctx
	retNow := s.opt.Retention.Clock()()
	n := 0
	for _, c := range calls {
		n += len(c.jobs)
	}
	var (
		aID, aTopic, aState = make([]string, 0, n), make([]string, 0, n), make([]string, 0, n)
		aPrio, aDelay, aTTR = make([]int64, 0, n), make([]int64, 0, n), make([]int64, 0, n)
		aDue, aCreated      = make([]time.Time, 0, n), make([]time.Time, 0, n)
		aMax, aCall         = make([]int32, 0, n), make([]int32, 0, n)
		aBody               = make([][]byte, 0, n)
	)
	for i, c := range calls {
		for _, j := range c.jobs {
			body := j.Body
			if body == nil {
				body = []byte{}
			}
			aID, aTopic, aState = append(aID, j.ID), append(aTopic, j.Topic), append(aState, string(j.State))
			aPrio, aDelay, aTTR = append(aPrio, int64(j.Priority)), append(aDelay, msOf(j.Delay)), append(aTTR, msOf(j.TTR))
			aDue, aCreated = append(aDue, delayq.TruncMilli(j.Due).UTC()), append(aCreated, delayq.TruncMilli(j.Created).UTC())
			aMax, aCall = append(aMax, int32(j.MaxAttempts)), append(aCall, int32(i))
			aBody = append(aBody, body)
		}
	}
	start := time.Now()
	b := &pgx.Batch{}
	if s.opt.Retention.For > 0 {
		b.Queue(s.q.putDelete, aID, retNow)
	}
	seqs := make(map[string]uint64, n)
	taken := map[string]string{}
	b.Queue(s.q.putGroup, aID, aTopic, aState, aPrio, aDue, aCreated, aDelay, aTTR, aMax, aBody, aCall,
		int64(delayq.DefaultPriority)).Query(func(rows pgx.Rows) error {
		var id string
		var seq *int64
		var state *string
		_, err := pgx.ForEachRow(rows, []any{&id, &seq, &state}, func() error {
			if state != nil {
				taken[id] = *state
			} else {
				seqs[id] = uint64(*seq)
			}
			return nil
		})
		return err
	})
	err := s.pool.SendBatch(ctx, b).Close()
	if err != nil {
		if rowError(err) {
			for _, c := range calls {
				c.err = s.putAlone(ctx, c.jobs)
			}
			return
		}
		err = s.fail("put", err)
		for _, c := range calls {
			c.err = err
		}
		return
	}
	s.CommitHook.Committed(start)
	var put []*delayq.Job
	for _, c := range calls {
		c.err = nil
		for _, j := range c.jobs {
			if st, ok := taken[j.ID]; ok {
				c.err = fmt.Errorf("pgstore: put: %w", &delayq.ExistsError{ID: j.ID, State: delayq.State(st)})
				break
			}
		}
		if c.err != nil {
			continue
		}
		for _, j := range c.jobs {
			j.Seq = seqs[j.ID]
		}
		put = append(put, c.jobs...)
	}
	s.ring(put...)
}

// rowError says whether a group failed on an error one row can cause
// (SQLSTATE class 22, data exception; class 23, integrity constraint
// violation, a unique violation included), so that writing its calls
// one by one fails only that row's call.
func rowError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (strings.HasPrefix(pe.Code, "22") || strings.HasPrefix(pe.Code, "23"))
}
