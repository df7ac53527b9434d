package cli

import (
	"strings"
	"testing"
)

// TestServeRedisFlags: the Redis flags reach the configuration (a bad
// value is refused by name before anything starts), and --help lists
// every one of them with its environment variable.
func TestServeRedisFlags(t *testing.T) {
	code, _, errOut := run(t, "serve", "--redis", "redis://127.0.0.1:1/0", "--redis-prefix", "a:b",
		"--redis-buckets", "0", "--redis-wait-replicas=-1", "--redis-wait-timeout", "2m")
	if code == 0 {
		t.Fatal("serve with bad Redis settings exited 0")
	}
	for _, want := range []string{"redis-prefix", "redis-buckets", "redis-wait-replicas", "redis-wait-timeout"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("serve with a bad %s: stderr %q does not name it", want, errOut)
		}
	}
	t.Setenv("DELAYQ_REDIS_BUCKETS", "2000")
	if code, _, errOut := run(t, "serve", "--redis", "redis://127.0.0.1:1/0"); code == 0 || !strings.Contains(errOut, "redis-buckets: 2000 is out of range") {
		t.Errorf("DELAYQ_REDIS_BUCKETS=2000: exit %d, stderr %q; want a refusal naming redis-buckets", code, errOut)
	}
	_, out, _ := run(t, "serve", "--help")
	for _, want := range []string{"--redis-prefix", "DELAYQ_REDIS_PREFIX", "--redis-buckets", "DELAYQ_REDIS_BUCKETS",
		"--redis-volatile", "DELAYQ_REDIS_VOLATILE", "--redis-wait-replicas", "DELAYQ_REDIS_WAIT_REPLICAS",
		"--redis-wait-timeout", "DELAYQ_REDIS_WAIT_TIMEOUT"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %s", want)
		}
	}
}

// TestServePostgresFlags: the Postgres flags reach the configuration (a
// bad value is refused by name before anything connects, --postgres
// with --redis is refused), and --help lists every one of them with its
// environment variable.
func TestServePostgresFlags(t *testing.T) {
	code, _, errOut := run(t, "serve", "--postgres", "postgres://u@127.0.0.1:1/db", "--postgres-schema", "bad-name",
		"--postgres-statement-timeout", "0s", "--postgres-connect-timeout", "1h")
	if code == 0 {
		t.Fatal("serve with bad Postgres settings exited 0")
	}
	for _, want := range []string{"postgres-schema", "postgres-statement-timeout", "postgres-connect-timeout"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("serve with a bad %s: stderr %q does not name it", want, errOut)
		}
	}
	if code, _, errOut := run(t, "serve", "--postgres", "postgres://u@127.0.0.1:1/db", "--redis", "redis://127.0.0.1:1/0"); code == 0 || !strings.Contains(errOut, "pick one store") {
		t.Errorf("--postgres with --redis: exit %d, stderr %q; want a refusal", code, errOut)
	}
	if code, _, errOut := run(t, "serve", "--postgres", "postgres://u:pw@127.0.0.1:1/db", "--fsync", "50ms"); code == 0 || !strings.Contains(errOut, "synchronous_commit") {
		t.Errorf("--postgres with --fsync 50ms: exit %d, stderr %q; want a refusal", code, errOut)
	}
	_, out, _ := run(t, "serve", "--help")
	for _, want := range []string{"--postgres", "DELAYQ_POSTGRES", "--postgres-schema", "DELAYQ_POSTGRES_SCHEMA",
		"--postgres-statement-timeout", "DELAYQ_POSTGRES_STATEMENT_TIMEOUT", "--postgres-connect-timeout", "DELAYQ_POSTGRES_CONNECT_TIMEOUT"} {
		if !strings.Contains(out, want) {
			t.Errorf("serve --help lacks %s", want)
		}
	}
	// migrate --print needs no database and writes the schema's SQL.
	code, out, errOut = run(t, "migrate", "--print", "--postgres-schema", "jobsq")
	if code != 0 || !strings.Contains(out, `CREATE TABLE "jobsq".jobs`) || !strings.Contains(out, `FUNCTION "jobsq".put(`) {
		t.Errorf("migrate --print: exit %d, stderr %q; want the SQL of schema jobsq", code, errOut)
	}
	if code, _, _ := run(t, "migrate"); code != 2 {
		t.Errorf("migrate without --postgres or --print: exit %d, want 2", code)
	}
}
