package redisstore

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/storetest"
)

// redisAddrs returns the Redis seeds named by env (host:port, comma
// separated). Without them the test skips, except under CI=true, where a
// missing Redis is a failure: CI must run these tests.
func redisAddrs(t testing.TB, env string) []string {
	t.Helper()
	v := os.Getenv(env)
	if v == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is not set; CI must run the Redis tests (source <(scripts/redis-test-env.sh))", env)
		}
		t.Skipf("%s is not set; run `source <(scripts/redis-test-env.sh)` to run the Redis tests", env)
	}
	return strings.Split(v, ",")
}

// openStore opens a store under a fresh key prefix, so every test has an
// empty deployment of its own on the shared Redis.
func openStore(t testing.TB, addrs []string, opt Options) *Store {
	t.Helper()
	opt.Addrs = addrs
	if opt.Prefix == "" {
		opt.Prefix = "t" + nonce()
	}
	s, err := New(t.Context(), opt)
	if err != nil {
		t.Fatalf("New(%v) = %v", addrs, err)
	}
	return s
}

func factory(addrs []string) storetest.Factory {
	return storetest.Factory{
		Open: func(t *testing.T) store.Store { return openStore(t, addrs, Options{}) },
		Reopen: func(t *testing.T, s store.Store) store.Store {
			prefix := s.(*Store).opt.Prefix
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			return openStore(t, addrs, Options{Prefix: prefix, Retention: s.(*Store).opt.Retention})
		},
		ExpiresItself: true,
		OpenRetaining: func(t *testing.T, r store.Retention) store.Store {
			return openStore(t, addrs, Options{Retention: r})
		},
	}
}

func TestConformanceStandalone(t *testing.T) {
	storetest.Run(t, factory(redisAddrs(t, "DELAYQ_TEST_REDIS")))
}

func TestConformanceCluster(t *testing.T) {
	storetest.Run(t, factory(redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")))
}

// TestPutWhileAnotherPutHoldsTheID: while another put has claimed an id
// and not stored its job yet, a put of that id answers ErrUnavailable (to
// retry), not ErrExists: no job with that id can be read, and the other
// put may yet fail. The SDK's retried put and the scheduler's takeover
// count "exists" as stored.
func TestPutWhileAnotherPutHoldsTheID(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{})
	defer s.Close()
	ctx := t.Context()
	claim := "t|" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + nonce() // fresh: not stale
	if err := s.c.Do(ctx, s.c.B().Set().Key(s.k.claim("held")).Value(claim).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	j := &delayq.Job{ID: "held", Topic: "t", Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady,
		Due: delayq.TruncMilli(time.Now()), Created: delayq.TruncMilli(time.Now())}
	if err := s.Put(ctx, []*delayq.Job{j}); !errors.Is(err, delayq.ErrUnavailable) || errors.Is(err, delayq.ErrExists) {
		t.Fatalf("Put of an id another put holds = %v, want ErrUnavailable (retry), not ErrExists", err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "held"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get of that id = %v, want ErrNotFound: no job was stored", err)
	}
	// Once the holder gives up (unclaims), the put goes through.
	s.unclaim(ctx, "held", claim)
	if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
		t.Fatalf("Put after the holder gave up = %v", err)
	}
}

// TestPutThatLostItsClaimReplyUnclaims: a put whose id claim reached Redis
// but whose reply did not come back in time (here: Redis paused writes
// past the put's deadline) removes the claim once Redis answers again.
// Left behind, the claim refused every put of that id for staleClaim,
// and the scheduler took that refusal for a tick already fired.
//
// That takes the multi-step put (a Cluster's): on one node the claim and
// the job are one script, so a lost reply leaves both or neither
// (TestOneNodePutThatLostItsReplyIsWhole).
func TestPutThatLostItsClaimReplyUnclaims(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	s := openStore(t, addrs, Options{})
	defer s.Close()
	s.oneNode = false
	j := putDuringPause(t, addrs, s)
	if err := s.Put(t.Context(), []*delayq.Job{j}); err != nil {
		t.Fatalf("Put of the same id once Redis answers = %v, want it stored (the lost claim removed)", err)
	}
}

// TestOneNodePutThatLostItsReplyIsWhole: on one node a put whose reply
// was lost stored its job whole or not at all; here Redis ran it after
// the pause, so the retry is told the id exists and the job is there.
func TestOneNodePutThatLostItsReplyIsWhole(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	s := openStore(t, addrs, Options{})
	defer s.Close()
	// A block of seqs in hand that does not age out, so the put's one
	// script is what the pause holds (not the block's).
	if _, err := s.takeSeqs(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	s.seqs.at = time.Now().Add(time.Hour)
	j := putDuringPause(t, addrs, s)
	err := s.Put(t.Context(), []*delayq.Job{j})
	var ex *delayq.ExistsError
	if !errors.As(err, &ex) || ex.State != delayq.StateReady {
		t.Fatalf("Put of the same id once Redis answers = %v, want ExistsError{ready}", err)
	}
	got, err := s.Get(t.Context(), delayq.Ref{ID: j.ID})
	if err != nil || string(got.Body) != "x" || got.Seq == 0 {
		t.Fatalf("Get of the put whose reply was lost = %+v, %v; want the job", got, err)
	}
	if _, err := s.Get(t.Context(), delayq.Ref{Seq: got.Seq}); err != nil {
		t.Fatalf("Get by its seq = %v", err)
	}
}

// putDuringPause runs a put that gives up while Redis holds writes for
// 150 ms, and returns its job.
func putDuringPause(t *testing.T, addrs []string, s *Store) *delayq.Job {
	t.Helper()
	// Pause from a connection of its own: writes, scripts included, queue
	// up for 150 ms, long after the put below gives up. (Short: other
	// packages' tests share this Redis.)
	pause, err := net.Dial("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer pause.Close()
	if _, err := pause.Write([]byte("CLIENT PAUSE 150 WRITE\r\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(pause).ReadString('\n'); err != nil || line != "+OK\r\n" {
		t.Fatalf("CLIENT PAUSE = %q, %v", line, err)
	}
	j := &delayq.Job{ID: "lost-reply", Topic: "t", Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady,
		Due: delayq.TruncMilli(time.Now()), Created: delayq.TruncMilli(time.Now())}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	err = s.Put(ctx, []*delayq.Job{j})
	cancel()
	if err == nil {
		t.Fatal("Put with a 20 ms deadline during a 150 ms pause succeeded")
	}
	return j
}

// sharedFactory opens instances of one deployment (one key prefix) with
// short leases, for storetest.RunShared.
func sharedFactory(addrs []string) storetest.SharedFactory {
	return storetest.SharedFactory{
		Open: func(t *testing.T, n int, r store.Retention) []store.Store {
			prefix := "t" + nonce()
			out := make([]store.Store, n)
			for i := range out {
				out[i] = openStore(t, addrs, Options{
					Prefix: prefix, Retention: r, Buckets: 8, LeaseTTL: 600 * time.Millisecond,
					InstanceID: "shared" + strconv.Itoa(i),
				})
			}
			return out
		},
		Crash: func(t *testing.T, s store.Store) { s.(*Store).abandon() },
	}
}

func TestSharedStandalone(t *testing.T) {
	storetest.RunShared(t, sharedFactory(redisAddrs(t, "DELAYQ_TEST_REDIS")))
}

func TestSharedCluster(t *testing.T) {
	storetest.RunShared(t, sharedFactory(redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")))
}
