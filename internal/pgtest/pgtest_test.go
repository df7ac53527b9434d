package pgtest

import "testing"

// TestSyncStandbyKeepsCommitsAcrossKill9: the harness the Postgres
// failover tests stand on. A commit acknowledged by a primary with a
// synchronous standby is on the standby when the primary is killed with
// SIGKILL, and the promoted standby takes writes.
func TestSyncStandbyKeepsCommitsAcrossKill9(t *testing.T) {
	primary := Start(t, "synchronous_standby_names = 'standby1'", "synchronous_commit = on")
	standby := primary.StartStandby(t, "standby1")
	primary.WaitSync(t, "standby1")
	if _, err := primary.Psql("postgres", "CREATE TABLE acked (n int); INSERT INTO acked SELECT generate_series(1, 100)"); err != nil {
		t.Fatal(err)
	}
	primary.Kill9()
	if _, err := primary.Psql("postgres", "SELECT 1"); err == nil {
		t.Fatal("the killed primary still answers")
	}
	standby.Promote(t)
	got, err := standby.Psql("postgres", "SELECT count(*) FROM acked")
	if err != nil || got != "100" {
		t.Fatalf("promoted standby: count = %q, %v; want the 100 acknowledged rows\n%s", got, err, standby.Log())
	}
	if _, err := standby.Psql("postgres", "INSERT INTO acked VALUES (101)"); err != nil {
		t.Fatalf("promoted standby refuses writes: %v", err)
	}
}
