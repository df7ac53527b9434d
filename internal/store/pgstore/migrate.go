package pgstore

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// migrationFiles are the schema's numbered migrations, NNNN_name.sql,
// applied in order. Each is written for the schema "delayq" and the
// channel 'delayq_channel'; render substitutes the configured ones.
//
//go:embed migrations/*.sql
var migrationFiles embed.FS

// migration is one numbered step of the schema.
type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns every migration in version order.
func migrations() []migration {
	entries, err := fs.ReadDir(migrationFiles, "migrations")
	if err != nil {
		panic(err) // embedded: cannot fail
	}
	var out []migration
	for _, e := range entries {
		num, _, ok := strings.Cut(e.Name(), "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil {
			panic("pgstore: migration file " + e.Name() + " is not NNNN_name.sql")
		}
		b, _ := migrationFiles.ReadFile("migrations/" + e.Name())
		out = append(out, migration{version: v, name: e.Name(), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			panic(fmt.Sprintf("pgstore: migration %s out of sequence", m.name))
		}
	}
	return out
}

// SchemaVersion is the schema version this build writes and reads.
func SchemaVersion() int { return len(migrations()) }

// channel is the NOTIFY channel of a schema's jobs.
func channel(schema string) string { return schema + "_events" }

// render writes schema (and its channel) into a migration's SQL.
func render(sql, schema string) string {
	sql = strings.ReplaceAll(sql, "delayq.", pgx.Identifier{schema}.Sanitize()+".")
	return strings.ReplaceAll(sql, "'delayq_channel'", "'"+channel(schema)+"'")
}

// MigrationSQL returns the SQL that brings schema from version from
// (0: none) to this build's version, as `delayq migrate --print` writes
// it for DBAs who apply schema changes by hand: each step in a
// transaction, recording its version.
func MigrationSQL(schema string, from int) (string, error) {
	if err := CheckSchema(schema); err != nil {
		return "", err
	}
	var b strings.Builder
	id := pgx.Identifier{schema}.Sanitize()
	fmt.Fprintf(&b, "-- delayq schema %s, version %d to %d\n", schema, from, SchemaVersion())
	if from == 0 {
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", id)
		fmt.Fprintf(&b, "CREATE TABLE IF NOT EXISTS %s.schema_version (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now());\n", id)
	}
	for _, m := range migrations() {
		if m.version <= from {
			continue
		}
		fmt.Fprintf(&b, "\n-- %s\nBEGIN;\n%s\nINSERT INTO %s.schema_version (version) VALUES (%d);\nCOMMIT;\n", m.name, render(m.sql, schema), id, m.version)
	}
	return b.String(), nil
}

// migrate brings the schema to this build's version under a session
// advisory lock, so instances starting together apply each step once. A
// schema at a newer version refuses to start: this build would not know
// its tables. A role without CREATE can run a schema a DBA migrated.
func (s *Store) migrate(ctx context.Context) (from int, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return 0, s.fail("migrate", err)
	}
	defer conn.Release()
	key := "delayq.migrate." + s.opt.Schema
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock(hashtext($1))", key); err != nil {
		return 0, s.fail("migrate: take the migration lock", err)
	}
	defer func() {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(hashtext($1))", key)
	}()
	id := pgx.Identifier{s.opt.Schema}.Sanitize()
	var version int
	var exists bool
	err = conn.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, id+".schema_version").Scan(&exists)
	if err != nil {
		return 0, s.fail("migrate: read the schema version", err)
	}
	if exists {
		if err := conn.QueryRow(ctx, "SELECT coalesce(max(version), 0) FROM "+id+".schema_version").Scan(&version); err != nil {
			return 0, s.fail("migrate: read the schema version", err)
		}
	}
	want := SchemaVersion()
	if version > want {
		return version, fmt.Errorf("pgstore: schema %q is at version %d, newer than this delayq knows (%d): upgrade delayq, or point it at another schema", s.opt.Schema, version, want)
	}
	if version == want {
		return version, nil
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+id); err != nil {
			return version, s.fail(fmt.Sprintf("migrate: create schema %q (or have a DBA run `delayq migrate --print`)", s.opt.Schema), err)
		}
		if _, err := conn.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+id+".schema_version (version integer PRIMARY KEY, applied timestamptz NOT NULL DEFAULT now())"); err != nil {
			return version, s.fail("migrate: create the version table", err)
		}
	}
	for _, m := range migrations() {
		if m.version <= version {
			continue
		}
		err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, render(m.sql, s.opt.Schema)); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO "+id+".schema_version (version) VALUES ($1)", m.version)
			return err
		})
		if err != nil {
			return version, s.fail("migrate: apply "+m.name, err)
		}
		s.log.Info("postgres schema migrated", "schema", s.opt.Schema, "version", m.version)
	}
	return version, nil
}

// Migrate brings the schema of opt to this build's version, as Open
// does, and closes its connection: `delayq migrate`. It returns the
// version the schema was at.
func Migrate(ctx context.Context, opt Options) (from int, err error) {
	opt.setDefaults()
	s, err := prepare(opt)
	if err != nil {
		return 0, err
	}
	if err := s.connect(ctx); err != nil {
		return 0, err
	}
	defer s.pool.Close()
	return s.migrate(ctx)
}
