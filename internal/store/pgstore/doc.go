// Package pgstore is the PostgreSQL backend: every job is a row of one
// table in a schema of its own (default "delayq"), so an application can
// put a job inside its own transaction (the SQL function put, or package
// client/pgtx) and the job exists, and fires, only if that transaction
// commits.
//
// Layout (migrations/*.sql, applied at Open under an advisory lock):
// one jobs table with a partial index per state in the order that state
// is served or timed (ready by topic, priority, seq; delayed by due;
// reserved by deadline; retained by expiry), small tables for documents,
// chart series, pauses and instances, and a counts table of each topic's
// live job counts (counts.go), which every write transaction changes in
// the same transaction, so the topic statistics the servers read every
// second cost O(topics), not a scan of the jobs. Transitions lock the rows they
// change (SELECT ... FOR UPDATE, reserve with SKIP LOCKED) and apply the
// field effects of package store in Go, so every backend returns the same
// jobs. Concurrent puts are written together, one statement and one
// commit for all that queued while the previous one was in flight, each
// keeping its own answer (group.go).
//
// Timing: the instance holding the timer lease (a session advisory lock
// on a connection of its own) sleeps until its next due time, and
// consumers long-poll without polling the table. NOTIFY wakes them: the
// SQL put functions notify at commit when a server must act (a ready
// job, or one due before the timer's published promise, tick.go), and
// each instance sends its own writes' wake-ups after commit, many per
// transaction (notify.go): Postgres serializes the commits of
// transactions that notify, so no write of the servers' does. Any number
// of instances share one database; the lease moves when its holder's
// session ends.
package pgstore
