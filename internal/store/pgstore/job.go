package pgstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq"
)

// jobCols are the columns a job is read from, in scanJob's order.
const jobCols = "seq, id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, attempts, reservation, deadline, timeouts, releases, buries, kicks, last_reason, last_failed, history, ended, body"

// queries holds the store's SQL with the schema written in, built once.
type queries struct {
	schema, jobs string

	findByID, findBySeq, findMany, getBySeq, getByID, save        string
	saveKeep, saveMany, removeMany, retainMany                    string
	reserve, putDelete, putInsert, putTaken, putGroup, publish    string
	tickDelayed, tickReserved, tickExpire, tickNext, tickPaused   string
	kickBuried, kickDelayed                                       string
	pause, unpause, topics, topicStats, dueCounts                 string
	getDoc, listDocs, insertDoc, updateDoc, deleteDoc             string
	seriesInit, seriesLock, seriesSave, seriesRead, seriesExpire  string
	setMaxBody, privileges, heartbeat, instances, leaveInstance   string
	readyTopics, countsAdd, countsFold, countsDropZero            string
	listReady, listDelayed, listReserved, listBuried, listRetired string
}

func newQueries(schema string) queries {
	id := pgx.Identifier{schema}.Sanitize()
	t := func(s string) string { return strings.ReplaceAll(s, "S.", id+".") }
	q := queries{schema: schema, jobs: id + ".jobs"}
	// Two statements, not one with a CASE on which key was given: a
	// prepared statement's generic plan cannot use an index through the
	// CASE, so each call was planned afresh.
	q.findByID = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE id = $1 AND ended IS NULL FOR UPDATE`)
	q.findBySeq = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE seq = $1 AND ended IS NULL FOR UPDATE`)
	q.findMany = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE (id = ANY($1) OR seq = ANY($2)) AND ended IS NULL ORDER BY seq FOR UPDATE`)
	q.getByID = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE id = $1 AND (ended IS NULL OR expires > $2)`)
	q.getBySeq = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE seq = $1 AND (ended IS NULL OR expires > $2)`)
	q.save = t(`UPDATE S.jobs SET state = $2, priority = $3, due = $4, delay_ms = $5, attempts = $6, reservation = $7,
		deadline = $8, timeouts = $9, releases = $10, buries = $11, kicks = $12, last_reason = $13, last_failed = $14,
		history = $15, body = $16 WHERE seq = $1`)
	q.saveKeep = t(`UPDATE S.jobs SET state = $2, priority = $3, due = $4, delay_ms = $5, attempts = $6, reservation = $7,
		deadline = $8, timeouts = $9, releases = $10, buries = $11, kicks = $12, last_reason = $13, last_failed = $14,
		history = $15 WHERE seq = $1`)
	// saveMany writes what a transition that keeps the body changes, for
	// many jobs in one statement (Tick, Reserve, Kick).
	q.saveMany = t(`UPDATE S.jobs j SET state = x.state, priority = x.priority, due = x.due, delay_ms = x.delay_ms,
		attempts = x.attempts, reservation = x.reservation, deadline = x.deadline, timeouts = x.timeouts, releases = x.releases,
		buries = x.buries, kicks = x.kicks, last_reason = x.last_reason, last_failed = x.last_failed, history = x.history
		FROM unnest($1::bigint[], $2::text[], $3::bigint[], $4::timestamptz[], $5::bigint[], $6::integer[], $7::text[],
			$8::timestamptz[], $9::integer[], $10::integer[], $11::integer[], $12::integer[], $13::text[], $14::timestamptz[], $15::jsonb[])
			AS x(seq, state, priority, due, delay_ms, attempts, reservation, deadline, timeouts, releases, buries, kicks,
				last_reason, last_failed, history)
		WHERE j.seq = x.seq`)
	q.removeMany = t(`DELETE FROM S.jobs WHERE seq = ANY($1)`)
	q.retainMany = t(`UPDATE S.jobs j SET state = x.state, ended = x.ended, expires = x.expires, reservation = '', deadline = NULL,
		history = x.history, body = CASE WHEN $6 THEN j.body END
		FROM unnest($1::bigint[], $2::text[], $3::timestamptz[], $4::timestamptz[], $5::jsonb[]) AS x(seq, state, ended, expires, history)
		WHERE j.seq = x.seq`)
	// One ordered index scan per topic (jobs_ready), skipping rows other
	// reserves hold, and paused topics; then the best Max of them all.
	q.reserve = t(`SELECT x.* FROM unnest($1::text[]) AS tp(name)
		CROSS JOIN LATERAL (SELECT ` + jobCols + ` FROM S.jobs j WHERE j.state = 'ready' AND j.topic = tp.name
			ORDER BY j.priority, j.seq LIMIT $2 FOR UPDATE SKIP LOCKED) x
		WHERE NOT EXISTS (SELECT 1 FROM S.pauses p WHERE p.topic = tp.name AND p.until > $3)
		ORDER BY x.priority, x.seq LIMIT $2`)
	q.putDelete = t(`DELETE FROM S.jobs WHERE id = ANY($1) AND expires <= $2`)
	// nextval runs per row in the order unnest gives them: the seqs
	// follow the jobs' order in the put.
	q.putInsert = t(`INSERT INTO S.jobs (seq, id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body)
		SELECT nextval('S.job_seq'), * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[], $6::timestamptz[],
			$7::bigint[], $8::bigint[], $9::integer[], $10::bytea[])
		RETURNING id, seq`)
	// The group insert (group.go): every call's jobs with the call's
	// number ($11). taken finds each id held by a job (the retained
	// whose retention ran out were deleted before, in the same
	// transaction); the calls with a taken id are left out whole, the
	// others' jobs inserted with their seqs in the order of the arrays,
	// and counted (counts.go) in the same statement. Rows out: (id, seq,
	// NULL) per job inserted, (id, NULL, state) per id taken.
	q.putGroup = t(`WITH x AS MATERIALIZED (SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::bigint[], $5::timestamptz[],
			$6::timestamptz[], $7::bigint[], $8::bigint[], $9::integer[], $10::bytea[], $11::integer[]) WITH ORDINALITY
			AS x(id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body, call, n)),
		taken AS MATERIALIZED (SELECT x.call, x.id, j.state FROM x JOIN S.jobs j ON j.id = x.id),
		ins AS (INSERT INTO S.jobs (seq, id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body)
			SELECT nextval('S.job_seq'), id, topic, state, priority, due, created, delay_ms, ttr_ms, max_attempts, body
			FROM x WHERE x.call NOT IN (SELECT call FROM taken) ORDER BY x.n
			RETURNING id, seq, topic, state, priority),
		cnt AS (INSERT INTO S.counts AS c (topic, slot, ready, delayed, reserved, buried, urgent)
			SELECT topic, pg_backend_pid(), count(*) FILTER (WHERE state = 'ready'), count(*) FILTER (WHERE state = 'delayed'), 0, 0,
				count(*) FILTER (WHERE state = 'ready' AND priority < $12) FROM ins GROUP BY topic ORDER BY topic
			ON CONFLICT (topic, slot) DO UPDATE SET ready = c.ready + EXCLUDED.ready, delayed = c.delayed + EXCLUDED.delayed,
				urgent = c.urgent + EXCLUDED.urgent)
		SELECT id, seq, NULL::text FROM ins
		UNION ALL SELECT id, NULL, state FROM taken`)
	q.publish = t(`SELECT CASE WHEN p = 'infinity' THEN NULL ELSE p END FROM S.timer_publish($1) p`)
	q.putTaken = t(`SELECT id, state FROM S.jobs WHERE id = ANY($1) AND (ended IS NULL OR expires > $2)`)
	q.tickDelayed = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE state = 'delayed' AND due <= $1 ORDER BY due, seq LIMIT $2 FOR UPDATE SKIP LOCKED`)
	q.tickReserved = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE state = 'reserved' AND deadline <= $1 ORDER BY deadline, seq LIMIT $2 FOR UPDATE SKIP LOCKED`)
	// The CTE runs once: as "seq IN (subquery)" the planner may run the
	// locking subquery again per row, and each run passes over the rows
	// locked before, so one Tick removed more than Max (seen under
	// -race, where plans and timings differ).
	q.tickExpire = t(`WITH x AS MATERIALIZED (SELECT seq FROM S.jobs WHERE ended IS NOT NULL AND expires <= $1
		ORDER BY expires, seq LIMIT $2 FOR UPDATE SKIP LOCKED)
		DELETE FROM S.jobs j USING x WHERE j.seq = x.seq`)
	q.tickPaused = t(`SELECT topic FROM S.pauses WHERE until > $1`)
	q.tickNext = t(`SELECT least(
		(SELECT due FROM S.jobs WHERE state = 'delayed' ORDER BY due, seq LIMIT 1),
		(SELECT deadline FROM S.jobs WHERE state = 'reserved' ORDER BY deadline, seq LIMIT 1),
		(SELECT expires FROM S.jobs WHERE ended IS NOT NULL ORDER BY expires, seq LIMIT 1))`)
	q.kickBuried = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = 'buried' ORDER BY due, seq LIMIT $2 FOR UPDATE`)
	q.kickDelayed = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = 'delayed' ORDER BY due, seq LIMIT $2 FOR UPDATE`)
	q.pause = t(`INSERT INTO S.pauses (topic, until) VALUES ($1, $2) ON CONFLICT (topic) DO UPDATE SET until = EXCLUDED.until`)
	q.unpause = t(`DELETE FROM S.pauses WHERE topic = $1`)
	// A topic's counts are the sums of its rows in counts (counts.go);
	// its oldest ready job is one probe of jobs_ready_due. One statement,
	// one snapshot: the counts and the jobs agree.
	const topicSums = `SELECT topic, sum(ready)::bigint AS ready, sum(delayed)::bigint AS delayed,
		sum(reserved)::bigint AS reserved, sum(buried)::bigint AS buried, sum(urgent)::bigint AS urgent FROM S.counts`
	const topicOut = `SELECT c.topic, c.ready, c.delayed, c.reserved, c.buried, c.urgent,
		CASE WHEN c.ready > 0 THEN (SELECT j.due FROM S.jobs j WHERE (j.topic COLLATE "C") = c.topic AND j.state = 'ready' ORDER BY j.due LIMIT 1) END
		FROM (`
	const topicLive = `) c WHERE c.ready <> 0 OR c.delayed <> 0 OR c.reserved <> 0 OR c.buried <> 0`
	q.topics = t(topicOut + topicSums + ` GROUP BY topic` + topicLive)
	q.topicStats = t(topicOut + topicSums + ` WHERE topic = $1 GROUP BY topic` + topicLive)
	q.countsAdd = t(`INSERT INTO S.counts AS c (topic, slot, ready, delayed, reserved, buried, urgent)
		SELECT tp, pg_backend_pid(), r, d, rs, b, u FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[]) AS x(tp, r, d, rs, b, u)
		ON CONFLICT (topic, slot) DO UPDATE SET ready = c.ready + EXCLUDED.ready, delayed = c.delayed + EXCLUDED.delayed,
			reserved = c.reserved + EXCLUDED.reserved, buried = c.buried + EXCLUDED.buried, urgent = c.urgent + EXCLUDED.urgent`)
	// The session rows this fold may lock now, deleted and added into
	// slot 0 in one statement (the DELETE returns each row as it was
	// last committed); rows a writer holds wait for the next fold.
	q.countsFold = t(`WITH x AS MATERIALIZED (SELECT topic, slot FROM S.counts WHERE slot <> 0 FOR UPDATE SKIP LOCKED),
		d AS (DELETE FROM S.counts c USING x WHERE c.topic = x.topic AND c.slot = x.slot
			RETURNING c.topic, c.ready, c.delayed, c.reserved, c.buried, c.urgent)
		INSERT INTO S.counts AS c (topic, slot, ready, delayed, reserved, buried, urgent)
		SELECT topic, 0, sum(ready), sum(delayed), sum(reserved), sum(buried), sum(urgent) FROM d GROUP BY topic ORDER BY topic
		ON CONFLICT (topic, slot) DO UPDATE SET ready = c.ready + EXCLUDED.ready, delayed = c.delayed + EXCLUDED.delayed,
			reserved = c.reserved + EXCLUDED.reserved, buried = c.buried + EXCLUDED.buried, urgent = c.urgent + EXCLUDED.urgent`)
	q.countsDropZero = t(`DELETE FROM S.counts WHERE slot = 0 AND ready = 0 AND delayed = 0 AND reserved = 0 AND buried = 0 AND urgent = 0`)
	q.dueCounts = t(`SELECT due FROM S.jobs WHERE topic = $1 AND state = 'delayed' AND due <= $2 ORDER BY due, seq`)
	q.getDoc = t(`SELECT name, rev, data FROM S.docs WHERE kind = $1 AND name = $2`)
	q.listDocs = t(`SELECT name, rev, data FROM S.docs WHERE kind = $1 ORDER BY name`)
	q.insertDoc = t(`INSERT INTO S.docs (kind, name, rev, data) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING`)
	q.updateDoc = t(`UPDATE S.docs SET rev = $3, data = $4 WHERE kind = $1 AND name = $2 AND rev = $5`)
	q.deleteDoc = t(`DELETE FROM S.docs WHERE kind = $1 AND name = $2`)
	q.seriesInit = t(`INSERT INTO S.series (topic, step_s, start_s, ready, delayed, reserved, buried, fires, finishes, failures, lateness, lateness_max_ms, expires_s)
		VALUES ($1, $2, $3, 0, 0, 0, 0, 0, 0, 0, NULL, 0, $4) ON CONFLICT DO NOTHING`)
	q.seriesLock = t(`SELECT ready, delayed, reserved, buried, fires, finishes, failures, lateness, lateness_max_ms
		FROM S.series WHERE topic = $1 AND step_s = $2 AND start_s = $3 FOR UPDATE`)
	q.seriesSave = t(`UPDATE S.series SET ready = $4, delayed = $5, reserved = $6, buried = $7, fires = $8, finishes = $9,
		failures = $10, lateness = $11, lateness_max_ms = $12 WHERE topic = $1 AND step_s = $2 AND start_s = $3`)
	q.seriesRead = t(`SELECT start_s, ready, delayed, reserved, buried, fires, finishes, failures, lateness, lateness_max_ms
		FROM S.series WHERE topic = $1 AND step_s = $2 AND start_s BETWEEN $3 AND $4 ORDER BY start_s`)
	q.seriesExpire = t(`DELETE FROM S.series WHERE ctid = ANY(ARRAY(SELECT ctid FROM S.series WHERE expires_s <= $1 LIMIT 1000))`)
	q.setMaxBody = t(`INSERT INTO S.settings (name, value) VALUES ('max_body', $1) ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`)
	// The row's upsert, and the other instances alive (the bell rings
	// only for them).
	q.heartbeat = t(`WITH hb AS (INSERT INTO S.instances (id, url, protocols, since, seen, timer) VALUES ($1, $2, $3, $4, now(), $5)
		ON CONFLICT (id) DO UPDATE SET url = EXCLUDED.url, protocols = EXCLUDED.protocols, seen = now(), timer = EXCLUDED.timer)
		SELECT id FROM S.instances WHERE id <> $1 AND seen > now() - $6::interval`)
	q.readyTopics = t(`SELECT topic FROM S.counts GROUP BY topic HAVING sum(ready) > 0`)
	q.instances = t(`SELECT id, url, protocols, since, timer FROM S.instances WHERE seen > now() - $1::interval ORDER BY url, id`)
	q.leaveInstance = t(`DELETE FROM S.instances WHERE id = $1`)
	q.listReady = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = 'ready' AND (priority, seq) > ($2, $3) ORDER BY priority, seq LIMIT $4`)
	q.listDelayed = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = 'delayed' AND (due, seq) > ($2, $3) ORDER BY due, seq LIMIT $4`)
	q.listReserved = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = 'reserved' AND (deadline, seq) > ($2, $3) ORDER BY deadline, seq LIMIT $4`)
	q.listBuried = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = 'buried' AND (due, seq) > ($2, $3) ORDER BY due, seq LIMIT $4`)
	q.listRetired = t(`SELECT ` + jobCols + ` FROM S.jobs WHERE topic = $1 AND state = $5 AND ended IS NOT NULL AND expires > $6
		AND (ended, seq) > ($2, $3) ORDER BY ended, seq LIMIT $4`)
	sch := "'" + schema + "'"
	q.privileges = `SELECT 'USAGE on schema ` + schema + `' WHERE NOT has_schema_privilege(` + sch + `, 'USAGE')
		UNION ALL
		SELECT format('%s on table %s.%s', p, ` + sch + `, tb) FROM unnest(ARRAY['jobs','pauses','docs','series','instances','settings','timer','counts']) tb,
			unnest(ARRAY['SELECT','INSERT','UPDATE','DELETE']) p
		WHERE has_schema_privilege(` + sch + `, 'USAGE') AND NOT has_table_privilege(quote_ident(` + sch + `) || '.' || tb, p)
		UNION ALL
		SELECT 'USAGE on sequence ` + schema + `.job_seq' WHERE has_schema_privilege(` + sch + `, 'USAGE')
			AND NOT has_sequence_privilege(quote_ident(` + sch + `) || '.job_seq', 'USAGE')`
	return q
}

// scanJob reads one row of jobCols.
func scanJob(row pgx.Row) (*delayq.Job, error) {
	var (
		j                                 delayq.Job
		seq, prio, delayMS, ttrMS         int64
		state                             string
		due, created                      time.Time
		deadline, lastFailed, ended       *time.Time
		history                           []byte
		maxAttempts, attempts             int32
		timeouts, releases, buries, kicks int32
	)
	err := row.Scan(&seq, &j.ID, &j.Topic, &state, &prio, &due, &created, &delayMS, &ttrMS, &maxAttempts, &attempts,
		&j.Reservation, &deadline, &timeouts, &releases, &buries, &kicks, &j.LastReason, &lastFailed, &history, &ended, &j.Body)
	if err != nil {
		return nil, err
	}
	j.Seq, j.Priority, j.State = uint64(seq), uint32(prio), delayq.State(state)
	j.Due, j.Created = due.UTC(), created.UTC()
	j.Delay, j.TTR = time.Duration(delayMS)*time.Millisecond, time.Duration(ttrMS)*time.Millisecond
	j.MaxAttempts, j.Attempts = int(maxAttempts), int(attempts)
	j.Timeouts, j.Releases, j.Buries, j.Kicks = int(timeouts), int(releases), int(buries), int(kicks)
	j.Deadline, j.LastFailed, j.Ended = fromPtr(deadline), fromPtr(lastFailed), fromPtr(ended)
	if len(history) > 0 {
		if err := json.Unmarshal(history, &j.History); err != nil {
			return nil, fmt.Errorf("job %d: history: %w", seq, err)
		}
	}
	return &j, nil
}

// scanJobs reads every row.
func scanJobs(rows pgx.Rows) ([]*delayq.Job, error) {
	defer rows.Close()
	var out []*delayq.Job
	for rows.Next() {
		j, err := scanJob(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, j)
	}
	return out, rows.Err()
}

func fromPtr(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.UTC()
}

// ts is t in store precision for a nullable column: nil for the zero time.
func ts(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = delayq.TruncMilli(t).UTC()
	return &t
}

func msOf(d time.Duration) int64 { return d.Milliseconds() }

// historyJSON encodes a job's attempts; nil for none.
func historyJSON(h []delayq.Attempt) []byte {
	if len(h) == 0 {
		return nil
	}
	b, _ := json.Marshal(h) // plain fields: cannot fail
	return b
}

// saveArgs are q.save's arguments for j.
func saveArgs(j *delayq.Job) []any {
	return []any{int64(j.Seq), string(j.State), int64(j.Priority), delayq.TruncMilli(j.Due).UTC(), msOf(j.Delay), j.Attempts,
		j.Reservation, ts(j.Deadline), j.Timeouts, j.Releases, j.Buries, j.Kicks, j.LastReason, ts(j.LastFailed),
		historyJSON(j.History), j.Body}
}

// saver gathers jobs whose transition kept their body, to write them
// with one statement (q.saveMany) rather than one per job.
type saver struct {
	seq                                         []int64
	state, reservation, lastReason              []string
	priority, delay                             []int64
	due                                         []time.Time
	deadline, lastFailed                        []*time.Time
	attempts, timeouts, releases, buries, kicks []int
	history                                     [][]byte
}

func (v *saver) add(j *delayq.Job) {
	v.seq = append(v.seq, int64(j.Seq))
	v.state = append(v.state, string(j.State))
	v.priority = append(v.priority, int64(j.Priority))
	v.due = append(v.due, delayq.TruncMilli(j.Due).UTC())
	v.delay = append(v.delay, msOf(j.Delay))
	v.attempts = append(v.attempts, j.Attempts)
	v.reservation = append(v.reservation, j.Reservation)
	v.deadline = append(v.deadline, ts(j.Deadline))
	v.timeouts = append(v.timeouts, j.Timeouts)
	v.releases = append(v.releases, j.Releases)
	v.buries = append(v.buries, j.Buries)
	v.kicks = append(v.kicks, j.Kicks)
	v.lastReason = append(v.lastReason, j.LastReason)
	v.lastFailed = append(v.lastFailed, ts(j.LastFailed))
	v.history = append(v.history, historyJSON(j.History))
}

// queue queues the write of the jobs added: one q.save for one job (its
// plan is the primary key's, already prepared), one q.saveMany for more.
func (v *saver) queue(b *pgx.Batch, q *queries) {
	switch len(v.seq) {
	case 0:
		return
	case 1:
		b.Queue(q.saveKeep, v.seq[0], v.state[0], v.priority[0], v.due[0], v.delay[0], v.attempts[0], v.reservation[0],
			v.deadline[0], v.timeouts[0], v.releases[0], v.buries[0], v.kicks[0], v.lastReason[0], v.lastFailed[0], v.history[0])
		return
	}
	b.Queue(q.saveMany, v.seq, v.state, v.priority, v.due, v.delay, v.attempts, v.reservation, v.deadline,
		v.timeouts, v.releases, v.buries, v.kicks, v.lastReason, v.lastFailed, v.history)
}

// change runs a transition of the one job ref names: fn checks the job
// and changes it in place, and change writes it back and returns it.
func (s *Store) change(ctx context.Context, op string, ref delayq.Ref, fn func(j *delayq.Job) error) (*delayq.Job, error) {
	var out *delayq.Job
	var found error
	err := s.pipeTx(ctx, op, func(b *pgx.Batch) {
		s.queueFind(b, ref, func(j *delayq.Job, err error) { out, found = j, err })
	}, func(b *pgx.Batch) error {
		if found != nil {
			return found
		}
		before := countOf(out)
		if err := fn(out); err != nil {
			return err
		}
		b.Queue(s.q.save, saveArgs(out)...)
		c := counter{}
		c.move(before, out)
		c.queue(b, &s.q)
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.ring(out)
	return out, nil
}
