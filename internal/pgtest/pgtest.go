// Package pgtest runs real, throwaway PostgreSQL servers for tests that
// need more than the one shared test database: a primary with a
// synchronous streaming standby that a test kills and promotes.
//
// The servers are the machine's own PostgreSQL (Debian's postgresql
// package, /usr/lib/postgresql/N/bin), run as the postgres user, on free
// 127.0.0.1 ports, in directories removed when the test ends. Without
// PostgreSQL, or without root to switch to the postgres user, a test
// skips, except under CI=true, where that is a failure.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Server is one PostgreSQL server (a data directory and its postmaster).
type Server struct {
	t    testing.TB
	bin  string
	Dir  string // the data directory
	Port int
	Name string // the application name a standby connects with
}

// waitLimit bounds every wait on a server: start, catch-up, promotion.
const waitLimit = 60 * time.Second

// Bin returns the newest PostgreSQL binary directory, or "" when none is
// installed.
func Bin() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// need skips the test (fails under CI=true) when servers cannot run here.
func need(t testing.TB) string {
	t.Helper()
	why := ""
	bin := Bin()
	switch {
	case bin == "":
		why = "PostgreSQL is not installed (apt-get install postgresql; scripts/deps.sh does)"
	case os.Geteuid() != 0:
		why = "starting PostgreSQL servers needs root (to run them as the postgres user)"
	}
	if why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why)
	}
	return bin
}

// freePort returns a loopback port nobody listens on now, below Linux's
// ephemeral range (32768 and up), as scripts/pg-test-env.sh picks its
// own (23000-28999; these are 29000-32499). A port from the ephemeral
// range can be taken meanwhile as the local end of any test's outgoing
// connection, and a client that connects to a killed server's port in
// that range can be handed that same port as its own and connect to
// itself.
func freePort(t testing.TB) int {
	t.Helper()
	for range 1000 {
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(29000+rand.IntN(3500)))
		if err != nil {
			continue // taken: try another
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		return port
	}
	t.Fatal("pgtest: no free port in 29000-32499")
	return 0
}

// postgresDir makes a directory the postgres user owns, removed at
// cleanup. (t.TempDir is root's and closed to other users.)
func postgresDir(t testing.TB) string {
	t.Helper()
	u, err := user.Lookup("postgres")
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	dir, err := os.MkdirTemp("", "delayq-pgtest-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	return dir
}

// run runs a PostgreSQL program as the postgres user.
func run(t testing.TB, bin, prog string, args ...string) string {
	t.Helper()
	cmd := exec.Command("runuser", append([]string{"-u", "postgres", "--", filepath.Join(bin, prog)}, args...)...)
	cmd.Dir = "/" // the postgres user may not enter the test's directory
	// Output goes to a file, not a pipe: pg_ctl start leaves the
	// postmaster holding its stdout, and a pipe would never close.
	out, err := os.CreateTemp("", "pgtest-out-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.Remove(out.Name())
	defer out.Close()
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	b, _ := os.ReadFile(out.Name())
	if err != nil {
		t.Fatalf("pgtest: %s %s: %v\n%s", prog, strings.Join(args, " "), err, b)
	}
	return string(b)
}

// Start initialises and starts a server whose settings are conf
// (postgresql.conf lines, appended to the defaults), trusting local
// connections, and stops it at cleanup.
func Start(t testing.TB, conf ...string) *Server {
	t.Helper()
	bin := need(t)
	base := postgresDir(t)
	s := &Server{t: t, bin: bin, Dir: filepath.Join(base, "data"), Port: freePort(t)}
	run(t, bin, "initdb", "-D", s.Dir, "-A", "trust", "-U", "postgres", "--no-sync")
	s.configure(append([]string{
		"listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '" + base + "'",
		"max_connections = 100",
		"wal_level = replica",
		"max_wal_senders = 5",
		"hot_standby = on",
	}, conf...))
	s.hba("host replication all 127.0.0.1/32 trust")
	s.start()
	return s
}

func (s *Server) configure(lines []string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.Dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "\nport = %d\n%s\n", s.Port, strings.Join(lines, "\n"))
}

func (s *Server) hba(line string) {
	s.t.Helper()
	f, err := os.OpenFile(filepath.Join(s.Dir, "pg_hba.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		s.t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintln(f, line)
}

func (s *Server) start() {
	s.t.Helper()
	run(s.t, s.bin, "pg_ctl", "-D", s.Dir, "-l", filepath.Join(s.Dir, "server.log"), "-w", "-t", "60", "start")
	s.t.Cleanup(s.Stop)
}

// Stop stops the server at once (immediate mode) if it runs.
func (s *Server) Stop() {
	cmd := exec.Command("runuser", "-u", "postgres", "--", filepath.Join(s.bin, "pg_ctl"), "-D", s.Dir, "-m", "immediate", "stop")
	_ = cmd.Run() // already stopped or killed: nothing to do
}

// URL returns the server's URL for database db as user postgres.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", s.Port, db)
}

// Addr is the server's host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Log returns the server's log so far, for a failing test's message.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.Dir, "server.log"))
	return string(b)
}

// Kill9 kills the postmaster and every backend with SIGKILL, as a crash
// of the machine's database process would: nothing is flushed or handed
// over.
func (s *Server) Kill9() {
	s.t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, "postmaster.pid"))
	if err != nil {
		s.t.Fatalf("pgtest: kill -9: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		s.t.Fatalf("pgtest: kill -9: postmaster.pid: %v", err)
	}
	// The postmaster's children are its process group's: kill them all,
	// so no backend lives on to answer.
	_ = exec.Command("pkill", "-KILL", "-P", strconv.Itoa(pid)).Run() // none left: fine
	if err := exec.Command("kill", "-KILL", strconv.Itoa(pid)).Run(); err != nil {
		s.t.Fatalf("pgtest: kill -9 %d: %v", pid, err)
	}
	// Wait until the port no longer answers: the kill has taken.
	deadline := time.Now().Add(waitLimit)
	for time.Now().Before(deadline) {
		c, err := net.DialTimeout("tcp", s.Addr(), 100*time.Millisecond)
		if err != nil {
			return
		}
		c.Close()
		time.Sleep(10 * time.Millisecond)
	}
	s.t.Fatalf("pgtest: %s still answers after kill -9", s.Addr())
}

// StartStandby makes a streaming standby of primary (pg_basebackup -R)
// that connects under name, and starts it. With the primary's
// synchronous_standby_names naming it, it is a synchronous standby.
func (primary *Server) StartStandby(t testing.TB, name string) *Server {
	t.Helper()
	base := postgresDir(t)
	s := &Server{t: t, bin: primary.bin, Dir: filepath.Join(base, "data"), Port: freePort(t), Name: name}
	run(t, s.bin, "pg_basebackup", "-h", "127.0.0.1", "-p", strconv.Itoa(primary.Port), "-U", "postgres",
		"-D", s.Dir, "-R", "-X", "stream", "--no-sync",
		"-d", fmt.Sprintf("host=127.0.0.1 port=%d user=postgres application_name=%s", primary.Port, name))
	// The copy inherits the primary's settings; once promoted it has no
	// standby of its own to wait for (a failover manager clears this too).
	s.configure([]string{"unix_socket_directories = '" + base + "'", "synchronous_standby_names = ''"})
	s.start()
	return s
}

// Psql runs one SQL statement on the server's database db and returns
// its unaligned output.
func (s *Server) Psql(db, sql string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", "-u", "postgres", "--", filepath.Join(s.bin, "psql"),
		"-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-d", db, "-XAtqc", sql)
	// The postgres user may not enter the test's directory (a fresh
	// clone under a 0700 mktemp directory): psql then warns on stderr,
	// which must not end up in the answer.
	cmd.Dir = "/"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("psql %q: %v: %s%s", sql, err, out, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}

// WaitSync waits until the primary streams to standby name synchronously.
func (primary *Server) WaitSync(t testing.TB, name string) {
	t.Helper()
	waitFor(t, "standby "+name+" is synchronous", func() (bool, error) {
		out, err := primary.Psql("postgres", "SELECT state || ' ' || sync_state FROM pg_stat_replication WHERE application_name = '"+name+"'")
		if err == nil && !strings.HasSuffix(out, " sync") {
			// Said when the wait gives up: no row is a standby that never
			// connected; "catchup sync" one that is still copying.
			err = fmt.Errorf("pg_stat_replication says %q (state, sync_state)", out)
		}
		return err == nil, err
	})
}

// Promote makes a standby the primary and waits until it takes writes.
func (s *Server) Promote(t testing.TB) {
	t.Helper()
	run(t, s.bin, "pg_ctl", "-D", s.Dir, "-w", "-t", "60", "promote")
	waitFor(t, "promoted standby takes writes", func() (bool, error) {
		out, err := s.Psql("postgres", "SELECT pg_is_in_recovery(), current_setting('data_directory')")
		if err == nil && !strings.HasPrefix(out, "f|") {
			// Said when the wait gives up (it did once in CI): which
			// server answered on the port, and whether it saw itself as
			// still in recovery.
			err = fmt.Errorf("%s answers %q (in recovery, data directory), want %s out of recovery", s.Addr(), out, s.Dir)
		}
		return err == nil, err
	})
}

// CreateDB creates database name on the server.
func (s *Server) CreateDB(t testing.TB, name string) {
	t.Helper()
	if _, err := s.Psql("postgres", "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t testing.TB, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("pgtest: %s: not within %s (last error: %v)", what, waitLimit, errors.Join(last))
}
