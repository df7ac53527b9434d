package redisstore

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// abandon stops s as a crash would: its loops and connections end, but its
// leases and heartbeat stay in Redis until they run out.
func (s *Store) abandon() {
	s.cancel()
	s.wg.Wait()
	s.fan.Close()
	s.c.Close()
}

// group opens n instances of one deployment.
func group(t *testing.T, addrs []string, n int, opt Options) []*Store {
	t.Helper()
	opt.Prefix = "t" + nonce()
	out := make([]*Store, n)
	for i := range out {
		o := opt
		o.InstanceID = fmt.Sprintf("inst%d", i)
		o.AdvertiseURL = fmt.Sprintf("http://127.0.0.1:%d", 7000+i)
		o.Protocols = []string{"http"}
		out[i] = openStore(t, addrs, o)
		t.Cleanup(func() { out[i].Close() })
	}
	return out
}

// waitFor polls cond every 10 ms until it holds or limit passes.
func waitFor(t *testing.T, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("%s: not within %s", what, limit)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return time.Since(start)
}

// partition reports whether the instances hold every bucket exactly once.
func partition(stores []*Store, buckets int) bool {
	seen := map[int]int{}
	for _, s := range stores {
		for _, b := range s.Buckets() {
			seen[b]++
		}
	}
	if len(seen) != buckets {
		return false
	}
	for _, n := range seen {
		if n != 1 {
			return false
		}
	}
	return true
}

func TestLeasesRebalanceAndFailover(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	const ttl = 600 * time.Millisecond
	stores := group(t, addrs, 3, Options{Buckets: 12, LeaseTTL: ttl})
	waitFor(t, 5*time.Second, "3 instances split 12 buckets 4/4/4", func() bool {
		if !partition(stores, 12) {
			return false
		}
		for _, s := range stores {
			if len(s.Buckets()) != 4 {
				return false
			}
		}
		return true
	})

	dead := stores[2].Buckets()
	stores[2].abandon() // a crash: its leases and heartbeat stay until they run out
	// The bound is stated in the survivors' lease rounds, not in wall
	// time (a 1.4 s bound failed at load 9): while the dead instance's
	// lease on a bucket still stands, no survivor may hold that bucket;
	// once its leases and its heartbeat have run out, the first round
	// each survivor begins after that brings it to its share (12/2), so
	// when both have begun one the survivors hold every bucket.
	c, k := stores[0].c, stores[0].k
	var gone time.Time // when the dead instance's leases and heartbeat were seen gone
	waitFor(t, 5*time.Second, "the dead instance's leases and heartbeat run out", func() bool {
		standing := 0
		for _, b := range dead {
			// who holds b, seen before its lease is read: a survivor can
			// only have taken b once the lease was gone, and the dead
			// inst2 cannot write it again
			var holders []int
			for i, s := range stores[:2] {
				if slices.Contains(s.Buckets(), b) {
					holders = append(holders, i)
				}
			}
			owner, err := c.Do(t.Context(), c.B().Get().Key(k.lease(b)).Build()).ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				t.Fatal(err)
			}
			if owner != "inst2" {
				continue
			}
			standing++
			if len(holders) > 0 {
				t.Fatalf("inst%d holds bucket %d while the dead inst2's lease on it stands", holders[0], b)
			}
		}
		score, err := c.Do(t.Context(), c.B().Zscore().Key(k.instances()).Member("inst2").Build()).AsFloat64()
		if err != nil && !rueidis.IsRedisNil(err) {
			t.Fatal(err)
		}
		if standing > 0 || (err == nil && int64(score) > time.Now().UnixMilli()) {
			return false
		}
		gone = time.Now()
		return true
	})
	// A round that began after the dead leases ran out and has ended
	// (renewed also moves when a round takes a lease mid-way: a round
	// begun before could still be taking the buckets).
	began := func(s *Store) time.Time {
		s.leases.mu.Lock()
		defer s.leases.mu.Unlock()
		return s.leases.lastRound
	}
	took := waitFor(t, 5*time.Second, "each survivor begins a lease round after that", func() bool {
		return began(stores[0]).After(gone) && began(stores[1]).After(gone)
	})
	if !partition(stores[:2], 12) {
		t.Fatalf("after a round of each survivor begun once the dead leases ran out, they hold %v and %v, not all 12 buckets once",
			stores[0].Buckets(), stores[1].Buckets())
	}
	t.Logf("dead leases gone, then buckets failed over within one round (%s; lease ttl %s)", took, ttl)

	stores[1].Close() // a clean stop hands its buckets back at once
	took = waitFor(t, 5*time.Second, "last instance holds every bucket", func() bool {
		return partition(stores[:1], 12)
	})
	t.Logf("buckets moved after a clean stop in %s", took)
}

func TestInstancesListsLiveMembers(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	stores := group(t, addrs, 2, Options{Buckets: 4, LeaseTTL: 600 * time.Millisecond})
	waitFor(t, 5*time.Second, "buckets split", func() bool { return partition(stores, 4) })
	got, err := stores[0].Instances(t.Context())
	if err != nil {
		t.Fatalf("Instances() = %v", err)
	}
	if len(got) != 2 {
		t.Fatalf("Instances() = %d instances, want 2: %+v", len(got), got)
	}
	var all []int
	for i, in := range got {
		if want := fmt.Sprintf("http://127.0.0.1:%d", 7000+i); in.URL != want {
			t.Errorf("Instances()[%d].URL = %q, want %q", i, in.URL, want)
		}
		if in.Since.IsZero() || !slices.Equal(in.Protocols, []string{"http"}) {
			t.Errorf("Instances()[%d] = %+v, want since and protocols [http]", i, in)
		}
		all = append(all, in.Buckets...)
	}
	slices.Sort(all)
	if !slices.Equal(all, []int{0, 1, 2, 3}) {
		t.Errorf("buckets listed = %v, want [0 1 2 3]", all)
	}
	stores[1].Close()
	got, err = stores[0].Instances(t.Context())
	if err != nil || len(got) != 1 {
		t.Errorf("after Close: Instances() = %+v, %v; want only the live one", got, err)
	}
}

func TestNotifyAcrossInstances(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	stores := group(t, addrs, 2, Options{})
	a, b := stores[0], stores[1]
	events, err := a.Notify(t.Context())
	if err != nil {
		t.Fatalf("Notify() = %v", err)
	}
	// Pub/sub keeps no backlog: B's put must come after A subscribed.
	waitFor(t, 5*time.Second, "A listening for events", a.Listening)
	if err := a.MarkWaiting(t.Context(), []string{"wake"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	now := delayq.TruncMilli(time.Now())
	due := now.Add(time.Hour)
	put := []*delayq.Job{
		{ID: "r1", Topic: "wake", TTR: time.Second, State: delayq.StateReady, Due: now, Created: now},
		{ID: "d1", Topic: "wake", TTR: time.Second, State: delayq.StateDelayed, Due: due, Created: now},
	}
	start := time.Now()
	if err := b.Put(t.Context(), put); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	var gotReady, gotDue bool
	for !gotReady || !gotDue {
		select {
		case ev := <-events:
			gotReady = gotReady || ev.Topic == "wake" && ev.Count == 1
			gotDue = gotDue || ev.Due.Equal(due)
		case <-time.After(2 * time.Second):
			t.Fatalf("events after a put elsewhere: ready %v, due %v; want both", gotReady, gotDue)
		}
	}
	t.Logf("instance A heard of B's put in %s", time.Since(start))
}

// TestTickSoakRacingInstances makes five instances believe they all own
// every bucket and tick and reserve at once: every job must move once.
func TestTickSoakRacingInstances(t *testing.T) {
	eachRedis(t, testTickSoak)
}

// eachRedis runs test against the standalone Redis and the cluster.
func eachRedis(t *testing.T, test func(t *testing.T, addrs []string)) {
	t.Run("standalone", func(t *testing.T) { test(t, redisAddrs(t, "DELAYQ_TEST_REDIS")) })
	t.Run("cluster", func(t *testing.T) { test(t, redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")) })
}

// soakFor is how long the racing-timers soak runs against each Redis:
// DELAYQ_SOAK (a Go duration), default one minute.
func soakFor(t *testing.T) time.Duration {
	if v := os.Getenv("DELAYQ_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("DELAYQ_SOAK=%q: %v", v, err)
		}
		return d
	}
	return time.Minute
}

// testTickSoak runs rounds of many jobs due at once while five instances,
// each believing it owns every bucket, tick and reserve as fast as they
// can, until soakFor has passed. Every job must be moved exactly once and
// reserved once, never before its due time.
func testTickSoak(t *testing.T, addrs []string) {
	stores := group(t, addrs, 5, Options{Buckets: 4, LeaseTTL: time.Hour})
	for _, s := range stores {
		s.leases.mu.Lock()
		for b := range 4 {
			s.leases.mine[b] = true
		}
		s.leases.renewed = time.Now()
		s.leases.mu.Unlock()
	}
	end := time.Now().Add(soakFor(t))
	total := 0
	for round := 0; time.Now().Before(end) && !t.Failed(); round++ {
		total += soakRound(t, stores, round)
	}
	t.Logf("%d jobs moved exactly once by five racing instances", total)
}

// soakRound is one round of testTickSoak on fresh topics (so no topic's
// clock carries over from the previous round). It returns the jobs moved.
func soakRound(t *testing.T, stores []*Store, round int) int {
	const jobs, topics = 600, 6
	var names []string
	for k := range topics {
		names = append(names, fmt.Sprintf("soak%d-%d", round, k))
	}
	base := delayq.TruncMilli(time.Now())
	var put []*delayq.Job
	for i := range jobs {
		due := base.Add(time.Duration(i%50) * time.Millisecond)
		put = append(put, &delayq.Job{ID: fmt.Sprintf("r%d-j%d", round, i), Topic: names[i%topics],
			// The shared clock advances a millisecond every five calls, so
			// a slow round (a loaded CI machine) can run a minute of it; a
			// TTR of a day keeps expiries, which Tick also counts as
			// moves, out of a test of delayed jobs moved exactly once.
			TTR: 24 * time.Hour, State: delayq.StateDelayed, Due: due, Created: base.Add(-time.Second)})
	}
	if err := stores[0].Put(t.Context(), put); err != nil {
		t.Fatalf("Put() = %v", err)
	}
	var mu sync.Mutex
	moved := 0
	held := map[uint64]string{}
	var wg sync.WaitGroup
	var clock atomic.Int64 // shared, monotonic: the instances' clocks agree
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				now := base.Add(time.Duration(clock.Add(1)/5) * time.Millisecond)
				res, err := s.Tick(ctx, store.TickParams{Now: now, Max: 7})
				if err != nil {
					t.Errorf("instance %d: Tick = %v", i, err)
					return
				}
				now = base.Add(time.Duration(clock.Load()/5) * time.Millisecond)
				got, err := s.Reserve(ctx, store.ReserveParams{Topics: names, Max: 5, Now: now})
				if err != nil {
					t.Errorf("instance %d: Reserve = %v", i, err)
					return
				}
				// A job counts as early if its due is after the shared clock
				// read once the reserve returned (the tick that readied it ran
				// before, at a clock value no later than this).
				after := base.Add(time.Duration(clock.Load()/5) * time.Millisecond)
				mu.Lock()
				for _, n := range res.Ready {
					moved += n
				}
				for _, j := range got {
					if other, ok := held[j.Seq]; ok {
						t.Errorf("job %s reserved by %s and instance %d within its TTR", j.ID, other, i)
					}
					held[j.Seq] = fmt.Sprint("instance ", i)
					if j.Due.After(after) {
						t.Errorf("job %s reserved by %s before its due %s", j.ID, after, j.Due)
					}
				}
				done := len(held) == jobs
				mu.Unlock()
				if done {
					return
				}
			}
		}()
	}
	wg.Wait()
	if moved != jobs {
		t.Errorf("round %d: ticks moved %d jobs in all, want %d (each exactly once)", round, moved, jobs)
	}
	if len(held) != jobs {
		t.Errorf("round %d: reserved %d distinct jobs, want %d", round, len(held), jobs)
	}
	return moved
}

// syncBuffer is a log destination read while instances write to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestLeaseChangesAreLogged: an instance logs at INFO, naming them, the
// timer buckets it takes and the ones it hands to a new instance.
func TestLeaseChangesAreLogged(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	var logs syncBuffer
	opt := Options{Buckets: 4, LeaseTTL: 600 * time.Millisecond, Prefix: "t" + nonce(), InstanceID: "first",
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
	a := openStore(t, addrs, opt)
	t.Cleanup(func() { a.Close() })
	waitFor(t, 5*time.Second, "first instance logs taking every bucket", func() bool {
		return strings.Contains(logs.String(), `level=INFO msg="redisstore: timer buckets changed hands" instance=first gained="[0 1 2 3]" lost=[] held=4`)
	})
	opt.InstanceID, opt.Logger = "second", nil
	b := openStore(t, addrs, opt)
	t.Cleanup(func() { b.Close() })
	waitFor(t, 5*time.Second, "first instance logs handing two buckets over", func() bool {
		return regexp.MustCompile(`msg="redisstore: timer buckets changed hands" instance=first gained=\[\] lost="\[\d \d\]" held=2 instances=2`).MatchString(logs.String())
	})
}
