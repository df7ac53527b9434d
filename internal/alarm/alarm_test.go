package alarm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/api"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/history"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// receiver is a real HTTP server that records the events it is sent.
type receiver struct {
	*httptest.Server
	events chan api.AlarmEvent
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{events: make(chan api.AlarmEvent, 100)}
	r.Server = httptest.NewServer(r)
	t.Cleanup(r.Close)
	return r
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	var ev api.AlarmEvent
	b, _ := io.ReadAll(req.Body)
	if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &ev) != nil {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	r.events <- ev
}

// next returns the next event the receiver got, failing after 10 s.
func (r *receiver) next(t *testing.T) api.AlarmEvent {
	t.Helper()
	select {
	case ev := <-r.events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return api.AlarmEvent{}
}

// fixture is an engine over a memstore with an alarm service on it.
type fixture struct {
	t   *testing.T
	st  *memstore.Store
	e   *engine.Engine
	svc *Service
}

func newFixture(t *testing.T, cfg Config) *fixture {
	t.Helper()
	st := memstore.New()
	e := engine.New(st, engine.Config{})
	f := &fixture{t: t, st: st, e: e}
	f.svc = f.service(cfg)
	return f
}

// service returns another service over the fixture's store and engine,
// as a second instance sharing the store would have.
func (f *fixture) service(cfg Config) *Service {
	if cfg.AllowNets == nil {
		cfg.AllowNets = testNets // the receivers of the tests listen on loopback
	}
	m := f.e.Metrics()
	svc := New(f.st, Sources{
		Topics:   f.e.Topics,
		Failures: m.ByTopic,
	}, cfg)
	f.t.Cleanup(svc.Close)
	return svc
}

func (f *fixture) put(topic, id string) {
	f.t.Helper()
	if _, err := f.e.Put(context.Background(), []engine.PutRequest{{ID: id, Topic: topic, TTR: ptr(time.Minute)}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) reserve(topic string) *delayq.Job {
	f.t.Helper()
	js, err := f.e.Reserve(context.Background(), engine.ReserveRequest{Topics: []string{topic}})
	if err != nil || len(js) != 1 {
		f.t.Fatalf("Reserve(%s) = %v, %v", topic, js, err)
	}
	return js[0]
}

func (f *fixture) bury(topic, id string) {
	f.t.Helper()
	f.put(topic, id)
	j := f.reserve(topic)
	if _, err := f.e.Bury(context.Background(), engine.BuryRequest{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}}); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) set(name string, body string) *Alarm {
	f.t.Helper()
	a, err := Parse(name, []byte(body))
	if err != nil {
		f.t.Fatalf("Parse(%s) = %v", body, err)
	}
	a, _, err = f.svc.Put(context.Background(), a)
	if err != nil {
		f.t.Fatal(err)
	}
	return a
}

func (f *fixture) eval(svc *Service, at time.Time) {
	f.t.Helper()
	if err := svc.Evaluate(context.Background(), at); err != nil {
		f.t.Fatalf("Evaluate(%s) = %v", at, err)
	}
}

func check(t *testing.T, ev api.AlarmEvent, state, topic, cond string, value, threshold float64, at time.Time) {
	t.Helper()
	if ev.State != state || ev.Topic != topic || ev.Condition != cond || ev.Value != value || ev.Threshold != threshold || !ev.At.Equal(at) {
		t.Errorf("event = %+v; want %s %s %s value %v threshold %v at %s", ev, state, topic, cond, value, threshold, at)
	}
}

// TestFiringRepeatResolved: a condition that starts to hold sends one
// firing event, nothing more until repeat has passed, then a repeat with
// the same since, and one resolved event when it stops; a topic the globs
// do not match never fires.
func TestFiringRepeatResolved(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, Config{})
	f.set("dead", `{"url":"`+rcv.URL+`","topics":["jobs.*"],"when":{"buried_over":0},"repeat":"1m"}`)
	t0 := time.Now().Truncate(time.Millisecond)
	f.eval(f.svc, t0) // nothing buried
	f.bury("other", "o1")
	f.bury("jobs.a", "a1")
	f.eval(f.svc, t0.Add(time.Second))
	first := rcv.next(t)
	check(t, first, StateFiring, "jobs.a", CondBuried, 1, 0, t0.Add(time.Second))
	if !first.Since.Equal(t0.Add(time.Second)) {
		t.Errorf("since = %s, want %s", first.Since, t0.Add(time.Second))
	}
	f.eval(f.svc, t0.Add(2*time.Second))  // still holds; repeat not due
	f.eval(f.svc, t0.Add(60*time.Second)) // 59 s after the event: not yet
	f.eval(f.svc, t0.Add(61*time.Second))
	rep := rcv.next(t)
	check(t, rep, StateFiring, "jobs.a", CondBuried, 1, 0, t0.Add(61*time.Second))
	if !rep.Since.Equal(first.Since.Time) {
		t.Errorf("repeat since = %s, want the first's %s", rep.Since, first.Since)
	}
	conds, err := f.svc.Status(context.Background(), "dead")
	if err != nil || len(conds) != 1 || !conds[0].Firing || conds[0].Topic != "jobs.a" {
		t.Errorf("Status = %+v, %v; want jobs.a firing", conds, err)
	}
	if _, err := f.e.KickJob(context.Background(), delayq.Ref{ID: "a1"}); err != nil {
		t.Fatal(err)
	}
	f.eval(f.svc, t0.Add(62*time.Second))
	check(t, rcv.next(t), StateResolved, "jobs.a", CondBuried, 0, 0, t0.Add(62*time.Second))
	f.eval(f.svc, t0.Add(200*time.Second)) // resolved stays quiet
	f.bury("jobs.a", "a2")
	f.eval(f.svc, t0.Add(201*time.Second))
	check(t, rcv.next(t), StateFiring, "jobs.a", CondBuried, 1, 0, t0.Add(201*time.Second))
	select {
	case ev := <-rcv.events:
		t.Errorf("unexpected event %+v", ev)
	default:
	}
}

// TestOldestReadyAndFailures: oldest_ready_over compares the age of the
// oldest ready job at the evaluation time; failures_per_min_over counts
// releases, buries and TTR expiries since the evaluation a minute before.
func TestOldestReadyAndFailures(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, Config{})
	f.set("slow", `{"url":"`+rcv.URL+`","topics":["q"],"when":{"oldest_ready_over":"5m"}}`)
	f.set("failing", `{"url":"`+rcv.URL+`","topics":["f"],"when":{"failures_per_min_over":2}}`)
	f.put("q", "q1")
	t0 := time.Now().Truncate(time.Millisecond)
	f.eval(f.svc, t0)
	f.bury("f", "f1")
	for range 2 {
		j := f.reserve("q")
		if _, err := f.e.Release(context.Background(), engine.ReleaseRequest{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}}); err != nil {
			t.Fatal(err)
		}
	}
	f.put("f", "f2")
	j := f.reserve("f")
	for range 2 {
		if _, err := f.e.Release(context.Background(), engine.ReleaseRequest{Ref: delayq.Ref{ID: j.ID, Reservation: j.Reservation}}); err != nil {
			t.Fatal(err)
		}
		j = f.reserve("f")
	}
	f.eval(f.svc, t0.Add(10*time.Minute))
	got := map[string]api.AlarmEvent{}
	for range 2 {
		ev := rcv.next(t)
		got[ev.Alarm] = ev
	}
	if ev := got["failing"]; ev.State != StateFiring || ev.Topic != "f" || ev.Value != 3 || ev.Threshold != 2 {
		t.Errorf("failing = %+v; want firing on f with 3 failures over 2", ev)
	}
	// A release without a delay makes q1 ready at the release's instant,
	// which may fall a millisecond or two after t0: the age is measured
	// from the job's own due time.
	q1, err := f.e.Get(context.Background(), delayq.Ref{ID: "q1"})
	if err != nil {
		t.Fatal(err)
	}
	age := t0.Add(10 * time.Minute).Sub(q1.Due).Seconds()
	if ev := got["slow"]; ev.State != StateFiring || ev.Topic != "q" || math.Abs(ev.Value-age) > 0.001 || ev.Threshold != 300 {
		t.Errorf("slow = %+v; want firing on q, value %.3f s over 300", ev, age)
	}
	// A minute with no new failures resolves it.
	f.eval(f.svc, t0.Add(11*time.Minute+time.Second))
	if ev := rcv.next(t); ev.Alarm != "failing" || ev.State != StateResolved {
		t.Errorf("event = %+v, want failing resolved", ev)
	}
}

// TestLatenessP99: lateness_p99_over reads the history's percentiles.
func TestLatenessP99(t *testing.T) {
	rcv := newReceiver(t)
	st := memstore.New()
	e := engine.New(st, engine.Config{})
	h := history.New(history.Config{Topics: e.Topics})
	svc := New(st, Sources{Topics: e.Topics, LatenessP99: h.LatenessP99}, Config{AllowNets: testNets})
	defer svc.Close()
	if _, err := e.Put(context.Background(), []engine.PutRequest{{Topic: "late", TTR: ptr(time.Minute)}}); err != nil {
		t.Fatal(err)
	}
	h.Fired("late", []time.Duration{2 * time.Second, 3 * time.Second})
	if err := h.Sample(context.Background()); err != nil {
		t.Fatal(err)
	}
	a, err := Parse("lag", []byte(`{"url":"`+rcv.URL+`","when":{"lateness_p99_over":"1s"}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := svc.Put(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if err := svc.Evaluate(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if ev := rcv.next(t); ev.State != StateFiring || ev.Topic != "late" || ev.Condition != CondLatenessP99 || ev.Value < 2.9 || ev.Threshold != 1 {
		t.Errorf("event = %+v; want late firing with p99 about 3 s over 1", ev)
	}
}

// TestReceiverDownThenUp: an event to a receiver that is down is retried
// with backoff and arrives once the receiver is up; evaluations do not
// wait for it meanwhile.
func TestReceiverDownThenUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // down: connections are refused
	f := newFixture(t, Config{Retries: 1000, Backoff: 10 * time.Millisecond})
	f.set("dead", `{"url":"http://`+addr+`/hook","when":{"buried_over":0}}`)
	f.bury("t", "a")
	t0 := time.Now().Truncate(time.Millisecond)
	f.eval(f.svc, t0)
	f.eval(f.svc, t0.Add(time.Second)) // not blocked by the pending send
	rcv := &receiver{events: make(chan api.AlarmEvent, 10)}
	var up net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; {
		if up, err = net.Listen("tcp", addr); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		t.Skipf("cannot listen on %s again: %v", addr, err)
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(up)
	defer srv.Close()
	check(t, rcv.next(t), StateFiring, "t", CondBuried, 1, 0, t0)
}

// TestReceiverDownGivesUp: with the receiver down for good the event is
// given up after its retries and Close returns promptly.
func TestReceiverDownGivesUp(t *testing.T) {
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer rcv.Close()
	reg := prometheus.NewRegistry()
	f := newFixture(t, Config{Retries: 2, Backoff: time.Millisecond, Registry: reg})
	f.set("dead", `{"url":"`+rcv.URL+`","when":{"buried_over":0}}`)
	f.bury("t", "a")
	f.eval(f.svc, time.Now())
	// The sender ends once it gave up: wait for it, observably.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.svc.mu.Lock()
		n := len(f.svc.senders)
		f.svc.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sender did not give up")
		}
	}
	if got := testutil.ToFloat64(f.svc.met.events.WithLabelValues(outcomeGivenUp)); got != 1 {
		t.Errorf(`delayq_alarm_events_total{outcome="given_up"} = %v, want 1`, got)
	}
	if got := testutil.ToFloat64(f.svc.met.events.WithLabelValues(outcomeSent)); got != 0 {
		t.Errorf(`delayq_alarm_events_total{outcome="sent"} = %v, want 0`, got)
	}
}

// TestTwoInstancesSendOnce: two services over one store (as two instances
// over Redis) evaluating the same change send its event once.
func TestTwoInstancesSendOnce(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, Config{})
	other := f.service(Config{})
	f.set("dead", `{"url":"`+rcv.URL+`","when":{"buried_over":0},"repeat":"1m"}`)
	f.bury("t", "a")
	t0 := time.Now().Truncate(time.Millisecond)
	for i := range 5 {
		at := t0.Add(time.Duration(i) * 30 * time.Second)
		f.eval(f.svc, at)
		f.eval(other, at)
	}
	// Firing at 0, repeats at 60 s and 120 s: three events, each once.
	for _, want := range []time.Duration{0, 60 * time.Second, 120 * time.Second} {
		check(t, rcv.next(t), StateFiring, "t", CondBuried, 1, 0, t0.Add(want))
	}
	if _, err := f.e.KickJob(context.Background(), delayq.Ref{ID: "a"}); err != nil {
		t.Fatal(err)
	}
	at := t0.Add(3 * time.Minute)
	f.eval(other, at)
	f.eval(f.svc, at)
	check(t, rcv.next(t), StateResolved, "t", CondBuried, 0, 0, at)
	f.svc.Close()
	other.Close()
	select {
	case ev := <-rcv.events:
		t.Errorf("an event was sent twice: %+v", ev)
	default:
	}
}

// TestDeleteRemovesState: deleting an alarm deletes its state; an unknown
// name is an error matching delayq.ErrNotFound.
func TestDeleteRemovesState(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, Config{})
	f.set("dead", `{"url":"`+rcv.URL+`","when":{"buried_over":0}}`)
	f.bury("t", "a")
	f.eval(f.svc, time.Now())
	rcv.next(t)
	ctx := context.Background()
	if err := f.svc.Delete(ctx, "dead"); err != nil {
		t.Fatal(err)
	}
	if _, err := f.st.GetDoc(ctx, KindState, "dead"); !errors.Is(err, store.ErrDocNotFound) {
		t.Errorf("state after Delete: %v, want not found", err)
	}
	if err := f.svc.Delete(ctx, "dead"); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("second Delete = %v, want not found", err)
	}
	if _, err := f.svc.Get(ctx, "dead"); !errors.Is(err, delayq.ErrNotFound) {
		t.Errorf("Get after Delete = %v, want not found", err)
	}
}

// TestBadInput: every malformed definition gets its named code.
func TestBadInput(t *testing.T) {
	for _, c := range []struct{ name, body, code string }{
		{"a", `{"url":"ftp://x/y","when":{"buried_over":1}}`, "bad_url"},
		{"a", `{"url":"","when":{"buried_over":1}}`, "bad_url"},
		{"a", `{"url":"http://","when":{"buried_over":1}}`, "bad_url"},
		{"a", `{"url":"http://h/","when":{}}`, "no_condition"},
		{"a", `{"url":"http://h/"}`, "no_condition"},
		{"a", `{"url":"http://h/","when":{"buried_over":-1}}`, "bad_condition"},
		{"a", `{"url":"http://h/","when":{"oldest_ready_over":"-5m"}}`, "bad_condition"},
		{"a", `{"url":"http://h/","when":{"lateness_p99_over":-1}}`, "bad_condition"},
		{"a", `{"url":"http://h/","when":{"failures_per_min_over":-0.5}}`, "bad_condition"},
		{"a", `{"url":"http://h/","when":{"buried_over":1},"repeat":"-1m"}`, "bad_repeat"},
		{"a", `{"url":"http://h/","when":{"buried_over":1},"repeat":"10ms"}`, "bad_repeat"},
		{"a", `{"url":"http://h/","topics":["[a"],"when":{"buried_over":1}}`, "bad_topics"},
		{"a", `{"url":"http://h/","topics":[""],"when":{"buried_over":1}}`, "bad_topics"},
		{"a b", `{"url":"http://h/","when":{"buried_over":1}}`, "bad_alarm_name"},
		{"a", `{"url":"http://h/","when":{"buried_over":1},"colour":"red"}`, "bad_json"},
		{"a", `{"url":"http://h/","when":{"buried_more":1}}`, "bad_json"},
		{"a", `{"url":"http://h/","when":{"buried_over":1}} {}`, "bad_json"},
	} {
		_, err := Parse(c.name, []byte(c.body))
		if got := delayq.CodeOf(err); got != c.code {
			t.Errorf("Parse(%q, %s) = %v (code %q), want code %q", c.name, c.body, err, got, c.code)
		}
	}
}

// TestRunEveryInterval: Run evaluates at once, then every Interval, and
// returns when its context ends (in a synctest bubble: fake time).
func TestRunEveryInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := memstore.New()
		defer st.Close()
		svc := New(st, Sources{Topics: st.Topics}, Config{Interval: 10 * time.Second})
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- svc.Run(ctx) }()
		synctest.Wait()
		if n := svc.Evaluations(); n != 1 {
			t.Fatalf("evaluations at start = %d, want 1", n)
		}
		time.Sleep(35 * time.Second)
		synctest.Wait()
		if n := svc.Evaluations(); n != 4 {
			t.Errorf("evaluations after 35s = %d, want 4 (at 0, 10, 20, 30 s)", n)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}

// TestReceiverHangs: a receiver that never answers is cut off by the
// timeout and retried, then the event is given up.
func TestReceiverHangs(t *testing.T) {
	var calls atomic.Int32
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_, _ = io.ReadAll(r.Body) // then the server notices the client hanging up
		<-r.Context().Done()
	}))
	defer hang.Close()
	f := newFixture(t, Config{Timeout: 20 * time.Millisecond, Retries: 2, Backoff: time.Millisecond})
	f.set("dead", `{"url":"`+hang.URL+`","when":{"buried_over":0}}`)
	f.bury("t", "a")
	f.eval(f.svc, time.Now())
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		f.svc.mu.Lock()
		n := len(f.svc.senders)
		f.svc.mu.Unlock()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sender did not give up")
		}
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("the receiver was called %d times, want 3 (the first try and 2 retries)", got)
	}
}

// TestFailureCopiesOnlyWatched: the evaluator keeps the failure counts of
// the topics an alarm with a failure condition watches, and no others.
// It used to keep a copy of every topic ever counted at each evaluation
// of the last minute, with no alarm at all. A topic that becomes watched
// counts from then on, not its earlier failures.
func TestFailureCopiesOnlyWatched(t *testing.T) {
	rcv := newReceiver(t)
	f := newFixture(t, Config{})
	const topics = 200
	for i := range topics {
		f.bury(fmt.Sprintf("t%d", i), fmt.Sprintf("j%d", i))
	}
	kept := func() (n int) {
		f.svc.mu.Lock()
		defer f.svc.mu.Unlock()
		for _, sn := range f.svc.window {
			n += len(sn.counts)
		}
		return n
	}
	t0 := time.Now()
	for i := range 7 {
		f.eval(f.svc, t0.Add(time.Duration(i)*10*time.Second))
	}
	if n := kept(); n != 0 {
		t.Errorf("with no alarm the evaluator keeps %d topic counts, want 0", n)
	}
	f.set("old", `{"url":"`+rcv.URL+`","topics":["t1"],"when":{"failures_per_min_over":0}}`)
	f.set("late", `{"url":"`+rcv.URL+`","topics":["t2"],"when":{"buried_over":5}}`)
	f.eval(f.svc, t0.Add(70*time.Second))
	f.svc.mu.Lock()
	last := f.svc.window[len(f.svc.window)-1].counts
	f.svc.mu.Unlock()
	if len(last) != 1 || last["t1"].n != 1 {
		t.Errorf("the evaluation keeps %v, want t1's 1 failure only", last)
	}
	f.bury("t1", "again")
	f.eval(f.svc, t0.Add(80*time.Second))
	ev := rcv.next(t)
	if ev.Alarm != "old" || ev.State != StateFiring || ev.Value != 1 {
		t.Errorf("event = %+v, want old firing with the 1 failure since t1 was watched", ev)
	}
}
