package cli

import (
	"time"

	"github.com/alecthomas/kong"

	"github.com/delayq/delayq/internal/config"
)

// postgresFlags are serve's flags that tune the Postgres backend
// (config.PostgresSettings documents each; docs/postgres.md explains them).
type postgresFlags struct {
	PostgresSchema           string        `name:"postgres-schema" env:"DELAYQ_POSTGRES_SCHEMA" default:"${postgres_schema}" group:"Postgres" help:"Schema of delayq's tables and SQL functions (letters, digits, '_'), so deployments sharing one database never meet."`
	PostgresStatementTimeout time.Duration `name:"postgres-statement-timeout" env:"DELAYQ_POSTGRES_STATEMENT_TIMEOUT" default:"${postgres_statement_timeout}" group:"Postgres" help:"Cut off any statement that runs longer (statement_timeout); its request is answered 503 and the log names the timeout."`
	PostgresConnectTimeout   time.Duration `name:"postgres-connect-timeout" env:"DELAYQ_POSTGRES_CONNECT_TIMEOUT" default:"${postgres_connect_timeout}" group:"Postgres" help:"How long a start retries, with backoff, a database that does not answer (0: once)."`
}

// config returns the flags as config.PostgresSettings.
func (f *postgresFlags) config() config.PostgresSettings {
	return config.PostgresSettings{PostgresSchema: f.PostgresSchema, PostgresStatementTimeout: f.PostgresStatementTimeout,
		PostgresConnectTimeout: f.PostgresConnectTimeout}
}

// postgresVars feeds config.DefaultPostgresSettings into the flags' defaults.
func postgresVars() kong.Vars {
	d := config.DefaultPostgresSettings()
	return kong.Vars{
		"postgres_schema":            d.PostgresSchema,
		"postgres_statement_timeout": d.PostgresStatementTimeout.String(),
		"postgres_connect_timeout":   d.PostgresConnectTimeout.String(),
	}
}
