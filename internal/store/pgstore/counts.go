package pgstore

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
)

// The counts table (migrations/0003_counts.sql) keeps each topic's live
// job counts, so Topics reads a row or a few per topic instead of
// grouping every live job. Each write transaction adds what it changed
// to its session's row of the topic (slot = pg_backend_pid()), in one
// extra statement of the batch it already sends; the instance holding
// the timer lease folds the session rows into slot 0 (fold).

// foldEvery is how often the lease holder folds the counts' session rows
// into slot 0: between folds a topic has at most one row per session
// that wrote it, so Topics reads O(topics × pool sessions) rows.
const foldEvery = time.Minute

// counter gathers the count changes of one transaction, by topic.
type counter map[string]*[5]int64 // ready, delayed, reserved, buried, urgent

// jobCount is what a job adds to its topic's counts: its state, and
// whether it is urgent (ready with priority < DefaultPriority).
type jobCount struct {
	topic string
	state delayq.State
	prio  uint32
}

func countOf(j *delayq.Job) jobCount { return jobCount{j.Topic, j.State, j.Priority} }

// add adds n of c (n = -1: the job left that state).
func (m counter) add(c jobCount, n int64) {
	i := -1
	switch c.state {
	case delayq.StateReady:
		i = 0
	case delayq.StateDelayed:
		i = 1
	case delayq.StateReserved:
		i = 2
	case delayq.StateBuried:
		i = 3
	}
	if i < 0 { // retained or gone: not live
		return
	}
	d := m[c.topic]
	if d == nil {
		d = new([5]int64)
		m[c.topic] = d
	}
	d[i] += n
	if i == 0 && c.prio < delayq.DefaultPriority {
		d[4] += n
	}
}

// move counts a job going from before to its state now.
func (m counter) move(before jobCount, j *delayq.Job) {
	m.add(before, -1)
	m.add(countOf(j), 1)
}

// queue queues the upsert of m's nonzero changes on b, in topic order
// (one statement, whatever the number of topics).
func (m counter) queue(b *pgx.Batch, q *queries) {
	topics := make([]string, 0, len(m))
	for t, d := range m {
		if *d != [5]int64{} {
			topics = append(topics, t)
		}
	}
	if len(topics) == 0 {
		return
	}
	slices.Sort(topics)
	var cols [5][]int64
	for _, t := range topics {
		for i := range cols {
			cols[i] = append(cols[i], m[t][i])
		}
	}
	b.Queue(q.countsAdd, topics, cols[0], cols[1], cols[2], cols[3], cols[4])
}

// fold adds the session rows of the counts into slot 0 and drops the
// rows left at zero, when it is time: called by the lease holder.
// Rows a transaction holds are skipped (SKIP LOCKED) and folded next
// time, so a fold never waits for a writer, and never deadlocks with
// one.
func (s *Store) fold(ctx context.Context) error {
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue("SELECT set_config('synchronous_commit', 'off', true)")
	b.Queue(s.q.countsFold)
	b.Queue(s.q.countsDropZero)
	b.Queue("COMMIT")
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		return s.fail("fold counts", err)
	}
	return nil
}
