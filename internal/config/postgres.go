package config

import (
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq/internal/store/pgstore"
)

// PostgresSettings tune the PostgreSQL backend (used only with
// Config.Postgres; docs/postgres.md explains each).
type PostgresSettings struct {
	// PostgresSchema holds delayq's tables and SQL functions; several
	// deployments can share one database under different schemas.
	// Letters, digits and '_' (pgstore.CheckSchema). Default "delayq".
	PostgresSchema string
	// PostgresStatementTimeout cuts off any statement of the server that
	// runs longer (Postgres statement_timeout); the request is answered
	// 503 and the log names the timeout. Default 5s.
	PostgresStatementTimeout time.Duration
	// PostgresConnectTimeout is how long a start retries, with backoff,
	// a database that does not answer before it gives up. Default 30s.
	PostgresConnectTimeout time.Duration
}

// DefaultPostgresSettings returns the documented defaults.
func DefaultPostgresSettings() PostgresSettings {
	return PostgresSettings{PostgresSchema: "delayq", PostgresStatementTimeout: 5 * time.Second, PostgresConnectTimeout: 30 * time.Second}
}

// maxPostgresTimeout bounds the Postgres timeouts: a request held a
// quarter of an hour helps nobody.
const maxPostgresTimeout = 15 * time.Minute

// checkPostgresURL refuses a connection string pgx cannot parse, saying
// why without repeating it (it may hold a password).
func checkPostgresURL(s string) error {
	_, err := pgx.ParseConfig(s)
	return err
}

// validate reports every bad Postgres setting through add.
func (p PostgresSettings) validate(add func(field, format string, args ...any)) {
	if err := pgstore.CheckSchema(p.PostgresSchema); err != nil {
		add("postgres-schema", "%v", err)
	}
	if p.PostgresStatementTimeout <= 0 || p.PostgresStatementTimeout > maxPostgresTimeout {
		add("postgres-statement-timeout", "%v is out of range (more than 0, at most %v)", p.PostgresStatementTimeout, maxPostgresTimeout)
	}
	if p.PostgresConnectTimeout < 0 || p.PostgresConnectTimeout > maxPostgresTimeout {
		add("postgres-connect-timeout", "%v is out of range (0 to %v)", p.PostgresConnectTimeout, maxPostgresTimeout)
	}
}
