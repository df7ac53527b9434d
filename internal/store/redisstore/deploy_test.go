package redisstore

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestRefusesRedisWithoutPersistence: a Redis that persists nothing is
// refused unless Volatile; one with AOF or RDB save points is taken; one
// whose CONFIG is disabled is taken only when INFO shows AOF, else
// refused with a message that says so and what to do.
func TestRefusesRedisWithoutPersistence(t *testing.T) {
	open := func(port int, volatile bool) error {
		s, err := New(t.Context(), Options{Addrs: []string{fmt.Sprintf("127.0.0.1:%d", port)}, Prefix: "p" + nonce(), Volatile: volatile})
		if err == nil {
			s.Close()
		}
		return err
	}
	_, none := startRedis(t, 0)
	if err := open(none, false); err == nil || !strings.Contains(err.Error(), "persists nothing") || !strings.Contains(err.Error(), "--redis-volatile") {
		t.Errorf("New on a Redis without AOF or RDB = %v, want a refusal naming the cause and --redis-volatile", err)
	}
	if err := open(none, true); err != nil {
		t.Errorf("New with Volatile on a Redis without persistence = %v, want it to start", err)
	}
	_, aof := startRedis(t, 0, "--appendonly", "yes")
	if err := open(aof, false); err != nil {
		t.Errorf("New on a Redis with appendonly yes = %v", err)
	}
	_, rdb := startRedis(t, 0, "--save", "3600 1")
	if err := open(rdb, false); err != nil {
		t.Errorf("New on a Redis with RDB save points = %v", err)
	}
	_, hidden := startRedis(t, 0, "--rename-command", "CONFIG", "")
	if err := open(hidden, false); err == nil || !strings.Contains(err.Error(), "CONFIG GET is refused") {
		t.Errorf("New on a Redis without CONFIG and without AOF = %v, want a refusal saying CONFIG GET is refused", err)
	}
	_, hiddenAOF := startRedis(t, 0, "--rename-command", "CONFIG", "", "--appendonly", "yes")
	if err := open(hiddenAOF, false); err != nil {
		t.Errorf("New on a Redis without CONFIG but with AOF (INFO shows it) = %v", err)
	}
}

// TestSeqsNeverGoBack: a seq counter that Redis lost or rolled back (a
// restore of an older snapshot, a failover to a replica that lagged)
// does not make seqs repeat: the next seq is past every earlier one.
func TestSeqsNeverGoBack(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{})
	defer s.Close()
	ctx := t.Context()
	put := func(id string) uint64 {
		t.Helper()
		now := delayq.TruncMilli(time.Now())
		j := &delayq.Job{ID: id, Topic: "seqs", Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
		if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatalf("Put(%s) = %v", id, err)
		}
		return j.Seq
	}
	first := put("a")
	if second := put("b"); second <= first {
		t.Fatalf("seqs %d then %d: not increasing", first, second)
	}
	last := put("c")
	for _, rollback := range []string{"rolled back", "lost"} {
		var err error
		if rollback == "lost" {
			err = s.c.Do(ctx, s.c.B().Del().Key(s.k.seqCounter()).Build()).Error()
		} else {
			err = s.c.Do(ctx, s.c.B().Set().Key(s.k.seqCounter()).Value("2").Build()).Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		next := put("after-" + rollback)
		if next <= last {
			t.Errorf("seq after the counter was %s = %d, want above %d (the last seq before)", rollback, next, last)
		}
		last = next
		// An instance that starts now has no block in hand: its seqs
		// come from the counter, which the clock keeps above.
		other := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{Prefix: s.opt.Prefix})
		now := delayq.TruncMilli(time.Now())
		j := &delayq.Job{ID: "new-instance-" + rollback, Topic: "seqs", Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
		if err := other.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
		other.Close()
		if j.Seq <= last {
			t.Errorf("a new instance's seq after the counter was %s = %d, want above %d", rollback, j.Seq, last)
		}
		last = j.Seq
		if rollback == "lost" {
			err = s.c.Do(ctx, s.c.B().Del().Key(s.k.seqCounter()).Build()).Error()
		} else {
			err = s.c.Do(ctx, s.c.B().Set().Key(s.k.seqCounter()).Value("2").Build()).Error()
		}
		if err != nil {
			t.Fatal(err)
		}
		s.seqs.at = time.Time{} // the first instance's block has aged out
	}
	// A batch takes consecutive seqs.
	now := delayq.TruncMilli(time.Now())
	batch := []*delayq.Job{
		{ID: "b1", Topic: "seqs", TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now},
		{ID: "b2", Topic: "seqs", TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now},
	}
	if err := s.Put(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if batch[0].Seq <= last || batch[1].Seq != batch[0].Seq+1 {
		t.Errorf("batch seqs %d, %d after %d: want consecutive and above", batch[0].Seq, batch[1].Seq, last)
	}
	if j, err := s.Get(ctx, delayq.Ref{Seq: batch[1].Seq}); err != nil || j.ID != "b2" {
		t.Errorf("Get(seq %d) = %v, %v; want b2", batch[1].Seq, j, err)
	}
}

// TestPrefixesKeepDeploymentsApart: two deployments on one Redis under
// different prefixes share nothing: not ids, not topics, not jobs, not
// wake-ups, and every key of each starts with its own prefix.
func TestPrefixesKeepDeploymentsApart(t *testing.T) {
	for _, env := range []string{"DELAYQ_TEST_REDIS", "DELAYQ_TEST_REDIS_CLUSTER"} {
		t.Run(env, func(t *testing.T) {
			addrs := redisAddrs(t, env)
			pa, pb := "a"+nonce(), "b"+nonce()
			a := openStore(t, addrs, Options{Prefix: pa})
			defer a.Close()
			b := openStore(t, addrs, Options{Prefix: pb})
			defer b.Close()
			ctx := t.Context()
			events, err := b.Notify(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waitFor(t, 5*time.Second, "b listening", b.Listening)
			now := delayq.TruncMilli(time.Now())
			job := func(id string) *delayq.Job {
				return &delayq.Job{ID: id, Topic: "shared", Body: []byte(id), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
			}
			if err := a.Put(ctx, []*delayq.Job{job("same-id"), job("only-a")}); err != nil {
				t.Fatal(err)
			}
			// The same id in the other deployment is another job.
			jb := job("same-id")
			if err := b.Put(ctx, []*delayq.Job{jb}); err != nil {
				t.Fatalf("Put of an id deployment a holds, into b = %v, want stored", err)
			}
			if _, err := b.Get(ctx, delayq.Ref{ID: "only-a"}); !errors.Is(err, delayq.ErrNotFound) {
				t.Errorf("b.Get(only-a) = %v, want not found", err)
			}
			got, err := b.Reserve(ctx, store.ReserveParams{Topics: []string{"shared"}, Max: 10, Now: now})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].ID != "same-id" || got[0].Seq != jb.Seq {
				t.Errorf("b.Reserve = %v, want only b's own same-id", got)
			}
			stats, err := b.TopicStats(ctx, "shared")
			if err != nil {
				t.Fatal(err)
			}
			if stats.Ready != 0 || stats.Reserved != 1 {
				t.Errorf("b's stats of shared = %+v, want 0 ready, 1 reserved (a's two jobs not counted)", stats)
			}
			ta, err := a.TopicStats(ctx, "shared")
			if err != nil {
				t.Fatal(err)
			}
			if ta.Ready != 2 {
				t.Errorf("a's stats of shared = %+v, want its 2 ready jobs untouched by b's reserve", ta)
			}
			// a's wake-up never reaches b; one from another instance of
			// b's deployment, sent after it, does.
			b2 := openStore(t, addrs, Options{Prefix: pb})
			defer b2.Close()
			drain(events)
			// b waits on both topics: its marks are its deployment's.
			if err := b.MarkWaiting(ctx, []string{"shared", "b-only"}, time.Minute); err != nil {
				t.Fatal(err)
			}
			// and another instance of a's deployment waits on shared, so a
			// publishes its put (to its own deployment's channel).
			a2 := openStore(t, addrs, Options{Prefix: pa})
			defer a2.Close()
			if err := a2.MarkWaiting(ctx, []string{"shared"}, time.Minute); err != nil {
				t.Fatal(err)
			}
			if err := a.Put(ctx, []*delayq.Job{job("wake")}); err != nil {
				t.Fatal(err)
			}
			if err := b2.Put(ctx, []*delayq.Job{{ID: "b-wake", Topic: "b-only", TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}}); err != nil {
				t.Fatal(err)
			}
			timeout := time.After(5 * time.Second)
		wait:
			for {
				select {
				case e := <-events:
					if e.Topic == "shared" {
						t.Errorf("b got a wake-up for a's put: %+v", e)
					}
					if e.Topic == "b-only" {
						break wait
					}
				case <-timeout:
					t.Fatal("b's own wake-up did not arrive within 5s")
				}
			}
			// Every key either deployment wrote carries its own prefix.
			for _, s := range []*Store{a, b} {
				other := pb
				if s == b {
					other = pa
				}
				for _, k := range allKeys(t, s) {
					if !strings.HasPrefix(k, s.opt.Prefix+":") {
						t.Errorf("key %q of deployment %s lacks its prefix", k, s.opt.Prefix)
					}
					if strings.HasPrefix(k, other+":") {
						t.Errorf("key %q found under both prefixes", k)
					}
				}
			}
		})
	}
}

func drain(events <-chan store.Event) {
	for {
		select {
		case <-events:
		default:
			return
		}
	}
}

// allKeys lists the keys under s's prefix on every node (a test may SCAN).
func allKeys(t *testing.T, s *Store) []string {
	t.Helper()
	var out []string
	for _, n := range s.c.Nodes() {
		var cursor uint64
		for {
			e, err := n.Do(t.Context(), n.B().Scan().Cursor(cursor).Match(s.opt.Prefix+"*").Count(1000).Build()).AsScanEntry()
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, e.Elements...)
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	slices.Sort(out)
	if len(out) == 0 {
		t.Fatalf("no keys under prefix %s", s.opt.Prefix)
	}
	return slices.Compact(out)
}

// TestBucketCountMismatchRefused: the first instance of a deployment
// records its bucket count; one started under the same prefix with
// another count refuses to start, naming both counts, and one with the
// same count joins.
func TestBucketCountMismatchRefused(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	prefix := "m" + nonce()
	first := openStore(t, addrs, Options{Prefix: prefix, Buckets: 8})
	defer first.Close()
	_, err := New(t.Context(), Options{Addrs: addrs, Prefix: prefix, Buckets: 16})
	if err == nil || !strings.Contains(err.Error(), "uses 8 timer buckets") || !strings.Contains(err.Error(), "--redis-buckets 16") {
		t.Fatalf("New with 16 buckets where the deployment has 8 = %v, want a refusal naming both", err)
	}
	same := openStore(t, addrs, Options{Prefix: prefix, Buckets: 8})
	same.Close()
	// A deployment whose meta says another layout format is refused too.
	other := "f" + nonce()
	if err := first.c.Do(t.Context(), first.c.B().Hset().Key(other+":meta").FieldValue().FieldValue("buckets", "16").FieldValue("format", "0").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	if _, err := New(t.Context(), Options{Addrs: addrs, Prefix: other}); err == nil || !strings.Contains(err.Error(), "format") {
		t.Errorf("New on a deployment of another layout format = %v, want a refusal", err)
	}
}

func TestPrefixChecked(t *testing.T) {
	for _, p := range []string{"delayq", "team-a.prod_1", "A"} {
		if err := CheckPrefix(p); err != nil {
			t.Errorf("CheckPrefix(%q) = %v, want ok", p, err)
		}
	}
	for _, p := range []string{"", "a:b", "a{b}", "{x}", "a b", "é", strings.Repeat("x", maxPrefix+1)} {
		if err := CheckPrefix(p); err == nil {
			t.Errorf("CheckPrefix(%q) = nil, want an error", p)
		}
	}
	if _, err := New(t.Context(), Options{Addrs: []string{"127.0.0.1:1"}, Prefix: "a:b"}); err == nil || !strings.Contains(err.Error(), "prefix") {
		t.Errorf("New with prefix a:b = %v, want a refusal before connecting", err)
	}
}

// FuzzCheckPrefix: a prefix CheckPrefix accepts keeps every key of its
// deployment to itself: no key of it starts with another accepted
// prefix's keys, and its keys keep their hash tags (the first '{' of a
// key is the one keys.go put there).
func FuzzCheckPrefix(f *testing.F) {
	for _, s := range []string{"delayq", "a", "a:b", "{x}", "team-a.prod", "", "a}b"} {
		f.Add(s, "delayq")
	}
	f.Fuzz(func(t *testing.T, p, q string) {
		if CheckPrefix(p) != nil {
			return
		}
		k := keys{prefix: p}
		for _, key := range []string{k.topic("t")[0], k.claim("id"), k.seqShard(5), k.seqCounter(), k.meta(), k.bucketDue(3), k.events(), k.doc("policy", "n")} {
			if !strings.HasPrefix(key, p+":") {
				t.Fatalf("key %q of prefix %q does not start with it", key, p)
			}
			if i := strings.IndexAny(key, "{}"); i >= 0 && i < len(p) {
				t.Fatalf("key %q: prefix %q holds a brace and would take over the hash tag", key, p)
			}
			if q != p && CheckPrefix(q) == nil && strings.HasPrefix(key, q+":") {
				t.Fatalf("key %q of prefix %q is also under prefix %q", key, p, q)
			}
		}
	})
}

// TestPutsTakeSeqsInBlocks: an instance takes seqs from P:seq a block at
// a time, so puts while the block lasts leave the counter alone (on a
// Cluster one master would otherwise run a script for every put), and
// their seqs are consecutive below the counter.
func TestPutsTakeSeqsInBlocks(t *testing.T) {
	s := openStore(t, redisAddrs(t, "DELAYQ_TEST_REDIS"), Options{})
	defer s.Close()
	ctx := t.Context()
	put := func(id string) uint64 {
		t.Helper()
		now := delayq.TruncMilli(time.Now())
		j := &delayq.Job{ID: id, Topic: "seqs", Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
		if err := s.PutFresh(ctx, []*delayq.Job{j}); err != nil {
			t.Fatalf("Put(%s) = %v", id, err)
		}
		return j.Seq
	}
	counter := func() uint64 {
		t.Helper()
		v := ok(s.c.Do(ctx, s.c.B().Get().Key(s.k.seqCounter()).Build()).AsUint64())(t)
		return v
	}
	first := put("a")
	c := counter()
	s.seqs.at = time.Now().Add(time.Hour) // the block does not age out here
	second, third := put("b"), put("c")
	if got := counter(); got != c {
		t.Fatalf("P:seq went from %d to %d over two puts within a block, want it untouched", c, got)
	}
	if second != first+1 || third != first+2 || third > c {
		t.Fatalf("seqs %d, %d, %d with the counter at %d: want consecutive, within the block", first, second, third, c)
	}
}
