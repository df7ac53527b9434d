package pgstore

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// planIndexes returns the names of the indexes a JSON plan scans.
func planIndexes(plan any) []string {
	var out []string
	switch v := plan.(type) {
	case map[string]any:
		if name, ok := v["Index Name"].(string); ok {
			out = append(out, name)
		}
		for _, c := range v {
			out = append(out, planIndexes(c)...)
		}
	case []any:
		for _, c := range v {
			out = append(out, planIndexes(c)...)
		}
	}
	return out
}

// TestReservePlanUsesServingOrderIndex pins reserve's plan: on a fresh
// table never analyzed (the first minutes of a deployment, or any table
// autovacuum has not analyzed yet) holding a backlog of ready jobs, the
// exact statement Reserve sends, prepared as pgx prepares it, scans
// jobs_ready, the index in the order reserve hands jobs out. The planner
// once took jobs_ready_due, (topic, due), for it, and sorted every ready
// job of the topic on each reserve (spilled to disk: reserves at a third
// of their rate, a p99 of a second); that index keys its topic under
// the "C" collation so that reserve's "topic = ..." cannot use it. With
// that index made on plain (topic, due), this test fails: the custom
// plan is a bitmap scan of jobs_ready_due and a sort. Both the custom
// plan (the first executions) and the generic plan (the ones after) are
// checked.
func TestReservePlanUsesServingOrderIndex(t *testing.T) {
	url := pgURL(t)
	schema := "plan" + nonce()
	app := appConn(t)
	t.Cleanup(func() { _, _ = app.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+schema+" CASCADE") })
	s := openStore(t, Options{URL: url, Schema: schema})
	defer s.Close()
	ctx := t.Context()
	// Autovacuum must not analyze the table while the test reads plans:
	// the plan of a table never analyzed is the one this test pins.
	if _, err := app.Exec(ctx, "ALTER TABLE "+s.q.jobs+" SET (autovacuum_enabled = false)"); err != nil {
		t.Fatal(err)
	}
	// A backlog as producers leave it: 150,000 ready jobs of one topic,
	// at the default priority, put in batches whose jobs share their due
	// time (B-tree deduplication makes jobs_ready_due a fraction of
	// jobs_ready's size, which is what tempts the planner); vacuumed, as autovacuum soon does, but never
	// analyzed.
	if _, err := app.Exec(ctx, `INSERT INTO `+s.q.jobs+` (seq, id, topic, state, priority, due, created, ttr_ms, body)
		SELECT g, 'j' || g, 't', 'ready', 1024, timestamptz '2030-01-01' + (g / 1000) * interval '1 ms', now(), 60000, '\x00'
		FROM generate_series(1, 150000) g`); err != nil {
		t.Fatal(err)
	}
	if _, err := app.Exec(ctx, "VACUUM "+s.q.jobs); err != nil {
		t.Fatal(err)
	}
	var analyzed bool
	if err := app.QueryRow(ctx, `SELECT last_analyze IS NOT NULL OR last_autoanalyze IS NOT NULL FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'jobs'`, schema).Scan(&analyzed); err != nil {
		t.Fatal(err)
	}
	if analyzed {
		t.Fatal("the jobs table was analyzed: the test must read the plan of a table that never was")
	}
	if _, err := app.Exec(ctx, "PREPARE reserve AS "+s.q.reserve); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := app.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		var out []byte
		if err := app.QueryRow(ctx, "EXPLAIN (FORMAT JSON) EXECUTE reserve('{t}', 16, now())").Scan(&out); err != nil {
			t.Fatal(err)
		}
		var plan any
		if err := json.Unmarshal(out, &plan); err != nil {
			t.Fatal(err)
		}
		idx := planIndexes(plan)
		if !slices.Contains(idx, "jobs_ready") || slices.Contains(idx, "jobs_ready_due") {
			t.Errorf("%s: reserve scans indexes %v, want jobs_ready and not jobs_ready_due; plan:\n%s", mode, idx, out)
		}
	}
}

// TestSessionsUseGenericPlans: the store's sessions plan each prepared
// statement once (plan_cache_mode force_generic_plan), unless the URL
// names a plan_cache_mode of its own, which is kept. Left to choose,
// Postgres planned reserve and the tick's reads afresh at every call.
func TestSessionsUseGenericPlans(t *testing.T) {
	mode := func(s *Store) string {
		t.Helper()
		var m string
		if err := s.pool.QueryRow(t.Context(), "SHOW plan_cache_mode").Scan(&m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	s := openStore(t, Options{})
	defer s.Close()
	if m := mode(s); m != "force_generic_plan" {
		t.Errorf("plan_cache_mode = %s, want force_generic_plan", m)
	}
	url := pgURL(t)
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	own := openStore(t, Options{URL: url + sep + "plan_cache_mode=force_custom_plan"})
	defer own.Close()
	if m := mode(own); m != "force_custom_plan" {
		t.Errorf("plan_cache_mode with the URL's own = %s, want force_custom_plan", m)
	}
}
