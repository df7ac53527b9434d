package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/delayq/delayq"
)

// pipeTx runs a read-then-write transaction in two round trips instead
// of one per statement: BEGIN goes out with the reads queued by read,
// then write, from what they found, queues the writes, which go out with
// COMMIT. On a 2-core machine each round trip is two context switches
// and a wake-up of the Postgres backend, a good part of a transition's
// cost. An error write returns that wraps a delayq sentinel rolls back
// and is returned as it is; a database error becomes ErrUnavailable.
func (s *Store) pipeTx(ctx context.Context, op string, read func(b *pgx.Batch), write func(b *pgx.Batch) error) error {
	if err := s.check(); err != nil {
		return err
	}
	start := time.Now()
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return s.fail(op, err)
	}
	// A connection left inside a transaction is closed by the pool on
	// Release rather than handed out again.
	defer conn.Release()
	b := &pgx.Batch{}
	b.Queue("BEGIN")
	read(b)
	if err := conn.SendBatch(ctx, b).Close(); err != nil {
		rollback(ctx, conn)
		if isSentinel(err) {
			return err
		}
		return s.fail(op, err)
	}
	w := &pgx.Batch{}
	if err := write(w); err != nil {
		rollback(ctx, conn)
		if isSentinel(err) {
			return err
		}
		return s.fail(op, err)
	}
	w.Queue("COMMIT")
	if err := conn.SendBatch(ctx, w).Close(); err != nil {
		rollback(ctx, conn)
		return s.fail(op, err)
	}
	if st := conn.Conn().PgConn().TxStatus(); st != 'I' {
		// COMMIT of a transaction that failed answers ROLLBACK, not an
		// error; nothing here should fail silently, but never say
		// committed when it was not.
		rollback(ctx, conn)
		return s.fail(op, fmt.Errorf("transaction status %q after COMMIT", st))
	}
	s.CommitHook.Committed(start)
	return nil
}

// rollback ends conn's transaction, if any.
func rollback(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() == 'I' {
		return
	}
	_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
}

// queueFind queues the locking read of the live job ref names; done
// gets the job, or an ErrNotFound error.
func (s *Store) queueFind(b *pgx.Batch, ref delayq.Ref, done func(*delayq.Job, error)) {
	if ref.ID == "" && ref.Seq == 0 {
		done(nil, fmt.Errorf("pgstore: job %s: %w", ref, delayq.ErrNotFound))
		return
	}
	sql, key := s.q.findByID, any(ref.ID)
	if ref.ID == "" {
		sql, key = s.q.findBySeq, int64(ref.Seq)
	}
	b.Queue(sql, key).QueryRow(func(row pgx.Row) error {
		j, err := scanJob(row)
		if errors.Is(err, pgx.ErrNoRows) {
			done(nil, fmt.Errorf("pgstore: job %s: %w", ref, delayq.ErrNotFound))
			return nil
		}
		done(j, err)
		return err
	})
}
