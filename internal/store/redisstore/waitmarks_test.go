package redisstore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
)

// TestWakeUpsOnlyWhenAnotherInstanceWaits: a put's or a timer step's
// ready count is published only when another instance has a live mark
// on the topic (MarkWaiting). With two instances and no waiter, puts of
// every path (a lone put, a fresh put, a put of two topics) and a timer
// step publish nothing, nor does a mark of the publisher's own or one
// that lapsed; once the other instance marks the topics, each of them
// reaches it.
func TestWakeUpsOnlyWhenAnotherInstanceWaits(t *testing.T) {
	eachRedis(t, testWakeUpsOnlyWhenWaited)
}

func testWakeUpsOnlyWhenWaited(t *testing.T, addrs []string) {
	// One bucket, A's: A's Tick makes the delayed jobs ready.
	stores := group(t, addrs, 2, Options{Buckets: 1})
	a, b := stores[0], stores[1]
	ctx := t.Context()
	events := listening(t, a, b)
	waitFor(t, 5*time.Second, "A holding the bucket", func() bool { return len(a.Buckets()) == 1 })
	// Every publish of the test's Redis (no other test runs beside it).
	published := func() int { return clusterCalls(t, a, "publish") + clusterCalls(t, a, "spublish") }
	now := delayq.TruncMilli(time.Now())
	n := 0
	job := func(topic string, st delayq.State) *delayq.Job {
		n++
		due := now
		if st == delayq.StateDelayed {
			due = now.Add(-time.Millisecond)
		}
		return &delayq.Job{ID: "wm" + strconv.Itoa(n), Topic: topic, Body: []byte("x"), TTR: time.Minute, State: st, Due: due, Created: now}
	}
	put := func(fresh bool, jobs ...*delayq.Job) {
		t.Helper()
		var err error
		if fresh {
			err = a.PutFresh(ctx, jobs)
		} else {
			err = a.Put(ctx, jobs)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	tick := func(topic string) {
		t.Helper()
		res, err := a.Tick(ctx, store.TickParams{Now: time.Now(), Max: 10})
		if err != nil || res.Ready[topic] != 1 {
			t.Fatalf("Tick = %+v, %v; want %s:1", res, err, topic)
		}
	}
	puts := func() {
		t.Helper()
		put(true, job("w", delayq.StateReady))
		put(false, job("w", delayq.StateReady))
		put(false, job("w", delayq.StateReady), job("w2", delayq.StateReady)) // the multi-step path
		tick("tk")
	}

	// Nobody waits. (The delayed job's earlier due is published: timers
	// always listen.)
	put(false, job("tk", delayq.StateDelayed))
	before := published()
	puts()
	// A mark of A's own does not count.
	if err := a.MarkWaiting(ctx, []string{"w"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	put(true, job("w", delayq.StateReady))
	if got := published() - before; got != 0 {
		t.Fatalf("%d publishes for puts and a timer step that no other instance waits for, want 0", got)
	}

	// B waits on every topic: it hears each put and the timer step.
	if err := b.MarkWaiting(ctx, []string{"w", "w2", "tk"}, time.Minute); err != nil {
		t.Fatal(err)
	}
	put(false, job("tk", delayq.StateDelayed))
	drain(events)
	before = published()
	puts()
	want := map[string]int{"w": 3, "w2": 1, "tk": 1} // events per topic
	timeout := time.After(5 * time.Second)
	for len(want) > 0 {
		select {
		case ev := <-events:
			if ev.Topic == "" {
				continue
			}
			if want[ev.Topic]--; want[ev.Topic] == 0 {
				delete(want, ev.Topic)
			}
		case <-timeout:
			t.Fatalf("B did not hear the puts and timer step of topics it waits on: missing %v", want)
		}
	}
	if got := published() - before; got < 5 {
		t.Errorf("%d publishes for 4 puts and a timer step another instance waits for, want at least 5", got)
	}

	// A lapsed mark wakes no one.
	if err := b.MarkWaiting(ctx, []string{"gone"}, time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "B's short mark lapsed", func() bool {
		n, err := liveMarksScript.Exec(ctx, a.c, []string{a.k.waiting("gone")}, nil).AsInt64()
		return err == nil && n == 0
	})
	before = published()
	put(true, job("gone", delayq.StateReady))
	if got := published() - before; got != 0 {
		t.Errorf("%d publishes for a put whose topic's only mark lapsed, want 0", got)
	}
}

// liveMarksScript counts the live marks in a marks zset, by the Redis
// clock of the key's node, as waitedLua reads them.
var liveMarksScript = rueidis.NewLuaScriptReadOnly(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
`)

// racingStore is B's store in TestWaiterNeverMissesAPutElsewhere: at
// the point named by at it puts one job into the topic through A.
type racingStore struct {
	*Store
	other *Store

	mu    sync.Mutex
	at    string // "before mark", "before attempt" or "after attempt"
	topic string
	put   bool // the job of topic was put
}

func (r *racingStore) point(ctx context.Context, where string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.put || where != r.at {
		return nil
	}
	r.put = true
	now := delayq.TruncMilli(time.Now())
	return r.other.PutFresh(ctx, []*delayq.Job{{ID: r.topic, Topic: r.topic, Body: []byte("x"), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}})
}

func (r *racingStore) MarkWaiting(ctx context.Context, topics []string, life time.Duration) error {
	if err := r.point(ctx, "before mark"); err != nil {
		return err
	}
	return r.Store.MarkWaiting(ctx, topics, life)
}

func (r *racingStore) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	if err := r.point(ctx, "before attempt"); err != nil {
		return nil, err
	}
	jobs, err := r.Store.Reserve(ctx, p)
	if err == nil && len(jobs) == 0 {
		if err := r.point(ctx, "after attempt"); err != nil {
			return nil, err
		}
	}
	return jobs, err
}

// TestWaiterNeverMissesAPutElsewhere: an engine's long-poll reserve on
// instance B gets a job another instance, A, puts while B parks its
// waiter, marks the topic and tries the store, wherever the put falls:
// before the mark (B's attempt finds the job), between the mark and the
// attempt (likewise), or after the attempt came back empty (the put sees
// the mark and wakes B). Were the mark written after the attempt, the
// last put would be published to no one and B would wait out its poll.
func TestWaiterNeverMissesAPutElsewhere(t *testing.T) {
	eachRedis(t, func(t *testing.T, addrs []string) {
		stores := group(t, addrs, 2, Options{})
		a, b := stores[0], stores[1]
		rs := &racingStore{Store: b, other: a}
		e := engine.New(rs, engine.Config{})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() { defer close(done); _ = e.Run(ctx) }()
		defer func() { cancel(); <-done }()
		waitFor(t, 5*time.Second, "B listening", b.Listening)
		waitFor(t, 5*time.Second, "A subscribed", func() bool { return a.fan.own() == "1" })
		const wait = 5 * time.Second // the long poll; a lost wake-up waits it out
		for _, at := range []string{"before mark", "before attempt", "after attempt"} {
			for i := range 4 {
				topic := "race-" + strconv.Itoa(len(at)) + "-" + strconv.Itoa(i) // a fresh topic: no mark yet
				rs.mu.Lock()
				rs.at, rs.topic, rs.put = at, topic, false
				rs.mu.Unlock()
				start := time.Now()
				jobs, err := e.Reserve(ctx, engine.ReserveRequest{Topics: []string{topic}, N: 1, Wait: wait, By: "b"})
				if err != nil || len(jobs) != 1 || jobs[0].Topic != topic {
					t.Fatalf("%s, round %d: B's reserve = %v, %v after %s; want the job A put", at, i, jobs, err, time.Since(start).Round(time.Millisecond))
				}
			}
		}
	})
}
