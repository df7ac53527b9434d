// Package pgtx puts delayq jobs inside an application's own PostgreSQL
// transaction, for a server started with --postgres: the job exists, and
// fires, only if that transaction commits. It calls the SQL function
// put of the server's schema, so what it does is exactly what an
// application in any other language does by hand (docs/postgres.md).
//
//	tx, _ := pool.Begin(ctx)
//	tx.Exec(ctx, "INSERT INTO orders ...")
//	pgtx.PutTx(ctx, tx, "orderclose", body, client.ID("orderclose-42"), pgtx.Delay(30*time.Minute))
//	tx.Commit(ctx)
//
// It takes the options of client.Producer (client.ID, client.TTR,
// client.Priority, client.MaxAttempts) and adds Delay and At. A taken id
// fails with a *delayq.ExistsError naming the job's state (errors.Is
// delayq.ErrExists), as a Producer's put does; note that, as for any
// failed statement, Postgres then aborts the transaction (use a
// savepoint to carry on).
package pgtx

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/client"
)

// DefaultSchema is the schema a server uses unless --postgres-schema
// says otherwise.
const DefaultSchema = "delayq"

// Delay makes the job wait d from the put (by the database's clock).
func Delay(d time.Duration) client.PutOption {
	return func(r *client.PutRequest) { r.Delay = d }
}

// At makes the job due at t; a t in the past makes it ready at once.
func At(t time.Time) client.PutOption {
	return func(r *client.PutRequest) { r.At = t }
}

// Tx is the application's transaction: a pgx.Tx (pgx v5), or a
// *sql.Tx of database/sql (with pgx's stdlib driver, lib/pq, ...). Any
// value with pgx's QueryRow or database/sql's QueryRowContext works, a
// pool or connection too, but then the put commits on its own.
type Tx any

// Putter puts into the schema Schema; the zero value uses DefaultSchema.
type Putter struct {
	Schema string
}

// PutTx puts a job into topic inside tx, in DefaultSchema, and returns
// its id (the one given with client.ID, else a new UUIDv7 made here).
func PutTx(ctx context.Context, tx Tx, topic string, body []byte, opts ...client.PutOption) (string, error) {
	return Putter{}.PutTx(ctx, tx, topic, body, opts...)
}

// PutTx puts a job into topic inside tx, in p's schema, and returns its
// id.
func (p Putter) PutTx(ctx context.Context, tx Tx, topic string, body []byte, opts ...client.PutOption) (string, error) {
	r := client.PutRequest{Body: body}
	for _, o := range opts {
		o(&r)
	}
	schema := p.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	id := r.ID
	if id == "" {
		id = uuid.Must(uuid.NewV7()).String()
	}
	if body == nil {
		body = []byte{}
	}
	priority := int64(delayq.DefaultPriority)
	if r.Priority != nil {
		priority = int64(*r.Priority)
	}
	ttr := delayq.DefaultTTR
	if r.TTR > 0 {
		ttr = r.TTR
	}
	var at *time.Time
	if !r.At.IsZero() {
		at = &r.At
	}
	q := `SELECT job_id FROM ` + pgx.Identifier{schema}.Sanitize() +
		`.put(topic => $1, body => $2, delay => $3 * interval '1 millisecond', id => $4, priority => $5,` +
		` ttr => $6 * interval '1 millisecond', max_attempts => $7, at => $8)`
	args := []any{topic, body, r.Delay.Milliseconds(), id, priority, ttr.Milliseconds(), r.MaxAttempts, at}
	var got string
	var err error
	switch t := tx.(type) {
	case interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}:
		err = t.QueryRow(ctx, q, args...).Scan(&got)
	case interface {
		QueryRowContext(context.Context, string, ...any) *sql.Row
	}:
		err = t.QueryRowContext(ctx, q, args...).Scan(&got)
	default:
		return "", fmt.Errorf("pgtx: put into %q: %T is neither a pgx.Tx nor a *sql.Tx", topic, tx)
	}
	if err != nil {
		return "", fmt.Errorf("pgtx: put %q into %q: %w", id, topic, convert(id, err))
	}
	return got, nil
}

// convert turns delayq's SQLSTATEs into the errors a Producer returns:
// DQ001 (the id is taken) into *delayq.ExistsError with the state from
// DETAIL, DQ002 (a bad field) into *delayq.ValidationError.
func convert(id string, err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch pe.Code {
	case "DQ001":
		state, _ := strings.CutPrefix(pe.Detail, "state=")
		return &delayq.ExistsError{ID: id, State: delayq.State(state)}
	case "DQ002":
		field, _ := strings.CutPrefix(pe.Detail, "field=")
		return delayq.Invalid(fieldCodes[field], field, "%s", strings.TrimPrefix(pe.Message, "delayq: "))
	}
	return err
}

// fieldCodes are the API's error codes of the fields the SQL put checks.
var fieldCodes = map[string]string{
	"topic": delayq.CodeBadTopic, "id": delayq.CodeBadID, "body": delayq.CodeBodyTooBig,
	"delay": delayq.CodeBadDelay, "ttr": delayq.CodeBadTTR, "priority": delayq.CodeBadJSON,
	"max_attempts": delayq.CodeBadMaxAttempts, "jobs": delayq.CodeBadJSON,
}
