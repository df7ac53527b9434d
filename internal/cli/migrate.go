package cli

import (
	"fmt"

	"github.com/delayq/delayq/internal/store/pgstore"
)

// migrateCmd is `delayq migrate`: it brings a Postgres schema to this
// build's version (as `delayq serve --postgres` does at start), or, with
// --print, writes the SQL for a DBA who applies schema changes by hand.
type migrateCmd struct {
	Postgres       string `name:"postgres" env:"DELAYQ_POSTGRES" help:"The PostgreSQL database (postgres://user:pass@host:port/db?...). Not needed with --print."`
	PostgresSchema string `name:"postgres-schema" env:"DELAYQ_POSTGRES_SCHEMA" default:"${postgres_schema}" help:"Schema of delayq's tables and SQL functions."`
	Print          bool   `name:"print" help:"Write the SQL to stdout instead of running it: each migration in its own transaction, recording its version in SCHEMA.schema_version."`
	From           int    `name:"from" default:"0" help:"With --print: the schema version the database is at (0: none), so only the later migrations are written."`
}

// Run migrates or prints.
func (c *migrateCmd) Run(e *env) error {
	if c.From < 0 || c.From > pgstore.SchemaVersion() {
		return usageError{msg: fmt.Sprintf("--from %d is out of range (0 to %d, this build's schema version)", c.From, pgstore.SchemaVersion())}
	}
	if c.Print {
		sql, err := pgstore.MigrationSQL(c.PostgresSchema, c.From)
		if err != nil {
			return usageError{msg: err.Error()}
		}
		_, err = fmt.Fprint(e.stdout, sql)
		return err
	}
	if c.Postgres == "" {
		return usageError{msg: "--postgres is required (or --print to write the SQL)"}
	}
	if c.From != 0 {
		return usageError{msg: "--from applies only with --print (a migration reads the version from the database)"}
	}
	from, err := pgstore.Migrate(e.ctx, pgstore.Options{URL: c.Postgres, Schema: c.PostgresSchema})
	if err != nil {
		return err
	}
	if from == pgstore.SchemaVersion() {
		fmt.Fprintf(e.stdout, "schema %s is at version %d already\n", c.PostgresSchema, from)
		return nil
	}
	fmt.Fprintf(e.stdout, "schema %s migrated from version %d to %d\n", c.PostgresSchema, from, pgstore.SchemaVersion())
	return nil
}
