package pgstore

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Group insert.
//
// Concurrent Put calls are written together (store.Line): one
// statement, one transaction, one durable commit for many calls. A put
// on a 2-core machine spent most of its cost on things paid once per
// transaction (the round trip's writes and wake-ups on both sides,
// Postgres's transaction start and commit, the WAL flush), not per row.
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
	body int   // body bytes
	err  error // the call's answer, set by writeCalls
}

// putLine gathers the calls that wait for a slot (store.Line), set up
// on the first put.
type putLine struct {
	once sync.Once
	l    store.Line[*putCall]
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
	s.line.once.Do(func() {
		s.line.l = store.Line[*putCall]{
			Write:    func(_ context.Context, calls []*putCall) { s.writeCalls(calls) },
			InFlight: groupsInFlight,
			Size:     func(c *putCall) (int, int) { return len(c.jobs), c.body },
			MaxJobs:  maxGroupJobs,
			MaxBytes: maxGroupBody,
			Joins:    store.DistinctKeys(putIDs),
		}
	})
	if err := s.line.l.Do(ctx, c); err != nil {
		return fmt.Errorf("pgstore: put: %w", err)
	}
	return c.err
}

// putIDs are the ids of c's jobs: two calls of one id never share a
// group.
func putIDs(c *putCall) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, j := range c.jobs {
			if !yield(j.ID) {
				return
			}
		}
	}
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
