package redisstore

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

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
var liveMarksScript = newReadScript(`
return redis.call('ZCOUNT', KEYS[1], '(' .. serverMS(), '+inf')
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

// parkedStore is B's store in TestMovesToReadyWakeOnlyAWaitingInstance:
// it tells parked the topics of each store attempt of B's engine that
// came back empty, so the test makes a job ready only once B's waiter
// is parked and its topic marked (the engine marks before its attempt).
type parkedStore struct {
	*Store
	parked chan string
}

func (p *parkedStore) Reserve(ctx context.Context, rp store.ReserveParams) ([]*delayq.Job, error) {
	jobs, err := p.Store.Reserve(ctx, rp)
	if err == nil && len(jobs) == 0 {
		select {
		case p.parked <- rp.Topics[0]:
		default:
		}
	}
	return jobs, err
}

// TestMovesToReadyWakeOnlyAWaitingInstance: a release, a kick of one
// job, a kick of a topic, a give-back, an update that makes a job ready
// and a resume publish their topic's ready count only when another
// instance holds a live mark on the topic, tested in the script that
// makes the job ready (wokeLua, waitedLua). With two instances and no
// waiter none of them publishes, nor with only the publisher's own
// mark; with an engine on B long-polling the topic (its mark), each
// wakes B's waiter, which gets the job instead of waiting out its poll.
func TestMovesToReadyWakeOnlyAWaitingInstance(t *testing.T) {
	eachRedis(t, testMovesToReadyWake)
}

func testMovesToReadyWake(t *testing.T, addrs []string) {
	stores := group(t, addrs, 2, Options{})
	a, b := stores[0], stores[1]
	ctx := t.Context()
	events := listening(t, a, b)
	// Every publish of the test's Redis (no other test runs beside it).
	published := func() int { return clusterCalls(t, a, "publish") + clusterCalls(t, a, "spublish") }
	n := 0
	// put puts one job of topic on A, ready or delayed by an hour.
	put := func(topic string, st delayq.State) *delayq.Job {
		t.Helper()
		n++
		now := delayq.TruncMilli(time.Now())
		due := now
		if st == delayq.StateDelayed {
			due = now.Add(time.Hour)
		}
		j := &delayq.Job{ID: "mv" + strconv.Itoa(n), Topic: topic, Body: []byte("x"), TTR: time.Minute, State: st, Due: due, Created: now}
		if err := a.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
		return j
	}
	// reserved puts a ready job of topic and reserves it on A.
	reserved := func(topic string) *delayq.Job {
		t.Helper()
		put(topic, delayq.StateReady)
		jobs, err := a.Reserve(ctx, store.ReserveParams{Topics: []string{topic}, Max: 1, Now: time.Now(), By: "a"})
		if err != nil || len(jobs) != 1 {
			t.Fatalf("A's reserve of %s = %v, %v; want one job", topic, jobs, err)
		}
		return jobs[0]
	}
	held := func(j *delayq.Job) delayq.Ref { return delayq.Ref{ID: j.ID, Reservation: j.Reservation} }
	check := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	// Each move: prepare leaves a job of the topic not ready (and may
	// publish: a reserve's deadline, a delayed put's due), and returns
	// the move that makes it ready.
	moves := []struct {
		name    string
		prepare func(topic string) (move func())
	}{
		{"release", func(topic string) func() {
			j := reserved(topic)
			return func() {
				_, err := a.Release(ctx, store.ReleaseParams{Ref: held(j), Due: time.Now(), Now: time.Now()})
				check(err)
			}
		}},
		{"give back", func(topic string) func() {
			j := reserved(topic)
			return func() {
				_, err := a.GiveBack(ctx, store.GiveBackParams{Ref: held(j)})
				check(err)
			}
		}},
		{"kick job", func(topic string) func() {
			j := put(topic, delayq.StateDelayed)
			return func() {
				_, err := a.KickJob(ctx, store.KickJobParams{Ref: delayq.Ref{ID: j.ID}, Now: time.Now()})
				check(err)
			}
		}},
		{"kick", func(topic string) func() {
			j := reserved(topic)
			_, err := a.Bury(ctx, store.BuryParams{Ref: held(j), Now: time.Now()})
			check(err)
			return func() {
				k, err := a.Kick(ctx, store.KickParams{Topic: topic, Max: 10, Now: time.Now()})
				check(err)
				if k != 1 {
					t.Fatalf("kick of %s moved %d jobs, want 1", topic, k)
				}
			}
		}},
		{"update", func(topic string) func() {
			j := put(topic, delayq.StateDelayed)
			return func() {
				now := time.Now()
				u, err := a.Update(ctx, store.UpdateParams{Ref: delayq.Ref{ID: j.ID}, Due: &now, Now: now})
				check(err)
				if u.State != delayq.StateReady {
					t.Fatalf("update of %s: state %s, want ready", topic, u.State)
				}
			}
		}},
		{"resume", func(topic string) func() {
			put(topic, delayq.StateReady)
			check(a.Pause(ctx, store.PauseParams{Topic: topic, Until: time.Now().Add(time.Hour)}))
			return func() { check(a.Pause(ctx, store.PauseParams{Topic: topic})) }
		}},
	}

	// Nobody else waits: no move publishes, though B listens and A
	// marks the topics itself.
	for i, m := range moves {
		topic := "alone" + strconv.Itoa(i)
		move := m.prepare(topic)
		check(a.MarkWaiting(ctx, []string{topic}, time.Minute))
		before := published()
		move()
		if got := published() - before; got != 0 {
			t.Errorf("%s: %d publishes with no other instance waiting on the topic, want 0", m.name, got)
		}
	}
	drain(events)

	// B's engine long-polls each topic: the move wakes it at once.
	ps := &parkedStore{Store: b, parked: make(chan string, 1)}
	e := engine.New(ps, engine.Config{})
	ectx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ectx) }()
	defer func() { cancel(); <-done }()
	const wait = 10 * time.Second // the long poll: a lost wake-up waits it out
	for i, m := range moves {
		topic := "waited" + strconv.Itoa(i)
		move := m.prepare(topic)
		type answer struct {
			jobs []*delayq.Job
			err  error
		}
		got := make(chan answer, 1)
		go func() {
			jobs, err := e.Reserve(ctx, engine.ReserveRequest{Topics: []string{topic}, N: 1, Wait: wait, By: "b"})
			got <- answer{jobs, err}
		}()
		timeout := time.After(wait)
		for parked := false; !parked; {
			select {
			case p := <-ps.parked:
				parked = p == topic // not an earlier topic's waiter woken again
			case <-timeout:
				t.Fatalf("%s: B's engine made no empty store attempt on %s", m.name, topic)
			}
		}
		move()
		r := <-got
		if r.err != nil || len(r.jobs) != 1 || r.jobs[0].Topic != topic {
			t.Fatalf("%s: B's long poll = %v, %v; want the job A made ready (a lost wake-up waits out the poll)", m.name, r.jobs, r.err)
		}
	}
}

// TestMoveToDelayedPublishesOnlyALoweredDue: a release (or any move) of a
// job to delayed publishes its due time to the other instances' timers
// only when it lowered its bucket's entry, as a reserve's deadline does:
// an entry at or before the due already makes the bucket's timer step
// there and find it. Before, every such move published its due.
func TestMoveToDelayedPublishesOnlyALoweredDue(t *testing.T) {
	eachRedis(t, func(t *testing.T, addrs []string) {
		stores := group(t, addrs, 2, quietLeases)
		a, b := stores[0], stores[1]
		ctx := t.Context()
		events := listening(t, a, b)
		published := func() int { return clusterCalls(t, a, "publish") + clusterCalls(t, a, "spublish") }
		now := delayq.TruncMilli(time.Now())
		// The topic's entry: a delayed job due in an hour. Its jobs' TTR
		// is three hours, so a reserve's deadline does not lower it.
		d := &delayq.Job{ID: "d", Topic: "rel", Body: []byte("x"), TTR: 3 * time.Hour, State: delayq.StateDelayed, Due: now.Add(time.Hour), Created: now}
		r1 := &delayq.Job{ID: "r1", Topic: "rel", Body: []byte("x"), TTR: 3 * time.Hour, State: delayq.StateReady, Due: now, Created: now}
		r2 := &delayq.Job{ID: "r2", Topic: "rel", Body: []byte("x"), TTR: 3 * time.Hour, State: delayq.StateReady, Due: now, Created: now}
		if err := a.Put(ctx, []*delayq.Job{d, r1, r2}); err != nil {
			t.Fatal(err)
		}
		jobs, err := a.Reserve(ctx, store.ReserveParams{Topics: []string{"rel"}, Max: 2, Now: now, By: "a"})
		if err != nil || len(jobs) != 2 {
			t.Fatalf("Reserve = %v, %v; want two jobs", jobs, err)
		}
		before := published()
		later := now.Add(2 * time.Hour)
		if _, err := a.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: jobs[0].ID, Reservation: jobs[0].Reservation}, Due: later, Now: now}); err != nil {
			t.Fatal(err)
		}
		if n := published() - before; n != 0 {
			t.Errorf("a release to a due after the bucket's entry published %d times, want 0", n)
		}
		earlier := now.Add(30 * time.Minute)
		if _, err := a.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: jobs[1].ID, Reservation: jobs[1].Reservation}, Due: earlier, Now: now}); err != nil {
			t.Fatal(err)
		}
		hears(t, events, "due "+strconv.FormatInt(earlier.UnixMilli(), 10))
	})
}
