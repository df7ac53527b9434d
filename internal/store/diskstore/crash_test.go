package diskstore

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// crashDirEnv tells the test binary, re-executed by TestCrashRecovery, to
// run crashChild on that directory; crashRetainEnv, set, makes the child
// retain what it finishes (TestCrashRecoveryRetained).
const (
	crashDirEnv    = "DISKSTORE_CRASH_DIR"
	crashRetainEnv = "DISKSTORE_CRASH_RETAIN"
)

// crashOptions are the options of the child's store and of the reopen.
func crashOptions(retain bool) Options {
	if !retain {
		return Options{}
	}
	return Options{Retention: store.Retention{For: time.Hour, Now: func() time.Time { return t0 }}}
}

// TestCrashChild is the child side of TestCrashRecovery; it does nothing
// in a normal run.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashDirEnv)
	if dir == "" {
		t.Skip("runs only as TestCrashRecovery's child")
	}
	crashChild(dir, os.Getenv("DISKSTORE_CRASH_ROUND"))
}

// crashChild puts jobs from several goroutines until it is killed, and
// prints every acknowledged transition: "put <id> <seq>" after Put
// returned, "res <id> <reservation>" after Reserve returned, and, when it
// retains, "fin <id> <reservation>" after it finished (deleted under its
// reservation) the first job of a reserve.
func crashChild(dir, round string) {
	s, err := Open(dir, crashOptions(os.Getenv(crashRetainEnv) != ""))
	if err != nil {
		fmt.Println("open failed:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	deadline := time.Now().Add(20 * time.Second) // bound even if never killed
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := 0; i < 100_000 && time.Now().Before(deadline); i++ {
				if err := crashStep(ctx, s, fmt.Sprintf("r%s-g%d-%d", round, g, i), i); err != nil {
					fmt.Println("error:", err)
					os.Exit(3)
				}
			}
		})
	}
	wg.Wait()
	os.Exit(0)
}

// crashStep does one acknowledged write: a single put (ready, or delayed
// far ahead), a batch of five puts, or a reserve.
func crashStep(ctx context.Context, s *Store, id string, i int) error {
	switch i % 4 {
	case 3:
		jobs, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"crash"}, Max: 2, Now: t0, By: id})
		for _, j := range jobs {
			fmt.Printf("res %s %s\n", j.ID, j.Reservation)
		}
		if err != nil || len(jobs) == 0 || !s.retaining() {
			return err
		}
		j := jobs[0]
		if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}, Now: t0}); err != nil {
			return err
		}
		fmt.Printf("fin %s %s\n", j.ID, j.Reservation)
		return nil
	case 2:
		jobs := make([]*delayq.Job, 5)
		for k := range jobs {
			jobs[k] = crashJob(fmt.Sprintf("%s-%d", id, k), k%2 == 0)
		}
		err := s.Put(ctx, jobs)
		for _, j := range jobs {
			if err == nil {
				fmt.Printf("put %s %d\n", j.ID, j.Seq)
			}
		}
		return err
	default:
		j := crashJob(id, i%4 == 1)
		err := s.Put(ctx, []*delayq.Job{j})
		if err == nil {
			fmt.Printf("put %s %d\n", j.ID, j.Seq)
		}
		return err
	}
}

func crashJob(id string, delayed bool) *delayq.Job {
	j := &delayq.Job{ID: id, Topic: "crash", Body: []byte(id), State: delayq.StateReady, TTR: time.Hour, Due: t0, Created: t0}
	if delayed {
		j.State, j.Due = delayq.StateDelayed, t0.Add(24*time.Hour)
	}
	return j
}

// TestCrashRecovery kills a writing child process with SIGKILL at random
// moments, reopens the store and checks that every acknowledged job is
// there once, in its acknowledged state, and that no seq is ever reused.
func TestCrashRecovery(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("child process")
	}
	rounds := 4
	if raceEnabled || testing.Short() {
		rounds = 2
	}
	crashRounds(t, rounds, false)
}

// TestCrashRecoveryRetained is TestCrashRecovery with the retention on:
// the child also finishes jobs, and every acknowledged finish is there
// after kill -9 as a retained finished job, its attempt ended, its id
// still refused to a put.
func TestCrashRecoveryRetained(t *testing.T) {
	if os.Getenv(crashDirEnv) != "" {
		t.Skip("child process")
	}
	crashRounds(t, 2, true)
}

func crashRounds(t *testing.T, rounds int, retain bool) {
	dir := t.TempDir()
	r := rand.New(rand.NewPCG(7, 8))
	var maxSeq uint64
	for round := range rounds {
		acks := runAndKill(t, dir, round, time.Duration(50+r.IntN(400))*time.Millisecond, retain)
		maxSeq = checkRecovered(t, dir, crashOptions(retain), acks, maxSeq)
		fins := 0
		for _, a := range acks {
			if strings.HasPrefix(a, "fin ") {
				fins++
			}
		}
		if retain && fins == 0 {
			t.Errorf("round %d: the child acknowledged no finish", round)
		}
		t.Logf("round %d: %d acknowledged transitions (%d finishes) survived kill -9; max seq %d", round, len(acks), fins, maxSeq)
	}
}

// runAndKill runs the child on dir, kills it after the given time past its
// first acknowledgement and returns every line it printed.
func runAndKill(t *testing.T, dir string, round int, after time.Duration, retain bool) []string {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashDirEnv+"="+dir, "DISKSTORE_CRASH_ROUND="+strconv.Itoa(round))
	if retain {
		cmd.Env = append(cmd.Env, crashRetainEnv+"=1")
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	var lines []string
	killed := false
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if !killed {
			killed = true
			time.AfterFunc(after, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
		}
	}
	err = cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("child ended with %v, not by SIGKILL; output tail: %q", err, lines[max(0, len(lines)-3):])
	}
	return lines
}

// checkRecovered opens dir and checks the acknowledged lines against it;
// it returns the largest seq in the store after one more put.
func checkRecovered(t *testing.T, dir string, opts Options, acks []string, prevMax uint64) uint64 {
	t.Helper()
	s := openAt(t, dir, opts)
	defer s.Close()
	ctx := t.Context()
	finished := map[string]bool{} // a finish acknowledged after the reserve
	// A reserve's job may also be found finished with no "fin" line: the
	// child finished it and was killed before it printed the line.
	for _, line := range acks {
		if f := strings.Fields(line); len(f) == 3 && f[0] == "fin" {
			finished[f[1]] = true
		}
	}
	for _, line := range acks {
		f := strings.Fields(line)
		if len(f) != 3 {
			t.Fatalf("child printed %q", line)
		}
		j, err := s.Get(ctx, delayq.Ref{ID: f[1]})
		if err != nil {
			t.Fatalf("acknowledged %q: Get = %v", line, err)
		}
		switch {
		case f[0] == "put" && strconv.FormatUint(j.Seq, 10) != f[2]:
			t.Errorf("acknowledged %q: seq %d after restart", line, j.Seq)
		case f[0] == "res" && !finished[f[1]] && (j.State != delayq.StateReserved || j.Reservation != f[2]) &&
			j.State != delayq.StateFinished: // a finish made but killed before its line was printed
			t.Errorf("acknowledged %q: state %s reservation %q after restart", line, j.State, j.Reservation)
		case f[0] == "fin":
			n := len(j.History)
			if j.State != delayq.StateFinished || n == 0 || j.History[n-1].Outcome != delayq.OutcomeFinished {
				t.Errorf("acknowledged %q: state %s history %+v after restart", line, j.State, j.History)
			}
			if err := s.Put(ctx, []*delayq.Job{crashJob(f[1], false)}); !errors.Is(err, delayq.ErrExists) {
				t.Errorf("acknowledged %q: Put of its id after restart = %v, want ErrExists", line, err)
			}
		}
	}
	maxSeq := checkConsistent(t, s)
	if maxSeq < prevMax {
		t.Errorf("largest seq went from %d to %d", prevMax, maxSeq)
	}
	j := crashJob(fmt.Sprintf("after-%d", maxSeq), false)
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatal(err)
	}
	if j.Seq <= maxSeq {
		t.Errorf("Put after restart got seq %d, want > %d", j.Seq, maxSeq)
	}
	return j.Seq
}

// checkConsistent lists every job and checks seqs are unique and the
// counters match the jobs; it returns the largest seq.
func checkConsistent(t *testing.T, s *Store) uint64 {
	t.Helper()
	res, err := s.List(t.Context(), store.ListParams{Topic: "crash"})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[uint64]string{}
	perState := map[delayq.State]int{}
	var maxSeq uint64
	for _, j := range res.Jobs {
		if other, dup := seen[j.Seq]; dup {
			t.Errorf("seq %d held by %q and %q", j.Seq, other, j.ID)
		}
		seen[j.Seq] = j.ID
		perState[j.State]++
		maxSeq = max(maxSeq, j.Seq)
	}
	ts, err := s.Topics(t.Context())
	if err != nil || len(ts) != 1 {
		t.Fatalf("Topics() = %v, %v", ts, err)
	}
	got := map[delayq.State]int{delayq.StateReady: ts[0].Ready, delayq.StateDelayed: ts[0].Delayed, delayq.StateReserved: ts[0].Reserved}
	for st, n := range got {
		if perState[st] != n {
			t.Errorf("Topics() counts %d %s jobs, List finds %d", n, st, perState[st])
		}
	}
	return maxSeq
}
