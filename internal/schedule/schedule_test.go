package schedule

import (
	"context"
	"errors"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/engine"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
)

// recorder is the engine's put path, recording each job it stored and
// when, so tests can check every tick fired once and never early.
type recorder struct {
	e  *engine.Engine
	mu sync.Mutex
	// puts are the jobs stored, in put order.
	puts []put
}

type put struct {
	id  string
	due time.Time
	at  time.Time // when the put happened
}

func (r *recorder) Put(ctx context.Context, reqs []engine.PutRequest) ([]*delayq.Job, error) {
	jobs, err := r.e.Put(ctx, reqs)
	if err == nil {
		r.mu.Lock()
		for _, j := range jobs {
			r.puts = append(r.puts, put{j.ID, j.Due, time.Now()})
		}
		r.mu.Unlock()
	}
	return jobs, err
}

func (r *recorder) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	return r.e.Get(ctx, ref)
}

func (r *recorder) ids() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, p := range r.puts {
		out = append(out, p.id)
	}
	sort.Strings(out)
	return out
}

// finishAll deletes every job put so far that is due, as consumers
// would: a tick fired again after this would be a new job, not ErrExists.
func (r *recorder) finishAll(t *testing.T) {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.puts {
		if p.due.After(time.Now()) {
			continue // still delayed: no consumer can have it
		}
		_, err := r.e.Delete(t.Context(), delayq.Ref{ID: p.id}, true)
		if err != nil && !errors.Is(err, delayq.ErrNotFound) {
			t.Fatalf("delete %s: %v", p.id, err)
		}
	}
}

type fixture struct {
	st  *memstore.Store
	rec *recorder
}

func newFixture() *fixture {
	st := memstore.New()
	e := engine.New(st, engine.Config{Logger: slog.New(slog.DiscardHandler)})
	return &fixture{st: st, rec: &recorder{e: e}}
}

// service returns a service over the fixture's store; run starts it and
// returns its stop function.
func (f *fixture) service(cfg Config) *Service {
	cfg.Logger = slog.New(slog.DiscardHandler)
	return New(store.Schedules(f.st), f.rec, cfg)
}

func run(s *Service) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return func() { cancel(); <-done }
}

// ticks lists the ids of name's ticks at start+k·step for k in [from, to].
func ticks(name string, start time.Time, step time.Duration, from, to int) []string {
	var out []string
	for k := from; k <= to; k++ {
		out = append(out, JobID(name, start.Add(time.Duration(k)*step)))
	}
	sort.Strings(out)
	return out
}

func sameIDs(t *testing.T, got, want []string) {
	t.Helper()
	short := func(s []string) []string {
		if len(s) > 12 {
			return append(append(s[:6:6], "..."), s[len(s)-6:]...)
		}
		return s
	}
	if len(got) != len(want) {
		t.Fatalf("fired %d ticks, want %d:\ngot  %v\nwant %v", len(got), len(want), short(got), short(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("fired ticks differ at %d: got %s, want %s", i, got[i], want[i])
		}
	}
}

func TestEveryFiresEachTickOnceOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		s := f.service(Config{})
		start := delayq.TruncMilli(time.Now())
		if _, created, err := s.Put(t.Context(), Def{Name: "beat", Topic: "t", Every: 2 * time.Second}); err != nil || !created {
			t.Fatalf("Put = %v, created %v", err, created)
		}
		stop := run(s)
		time.Sleep(20*time.Second + 100*time.Millisecond)
		stop()
		// Ticks up to 20 s have fired; the one at 20.5 s... none: 22 s is
		// more than Lead ahead.
		sameIDs(t, f.rec.ids(), ticks("beat", start, 2*time.Second, 1, 10))
		for _, p := range f.rec.puts {
			if p.at.After(p.due) {
				t.Errorf("job %s put at %v, after its tick %v", p.id, p.at, p.due)
			}
			if p.due.Sub(p.at) > s.cfg.Lead {
				t.Errorf("job %s put %v before its tick, more than the lead", p.id, p.due.Sub(p.at))
			}
		}
		sc, err := s.Get(t.Context(), "beat")
		if err != nil || !sc.Last.Equal(start.Add(20*time.Second)) || sc.Pending {
			t.Fatalf("Get = %+v, %v; want last at 20 s, not pending", sc, err)
		}
	})
}

// TestCronAcrossDST fires a daily 09:00 schedule in Europe/Berlin across
// the October change from CEST (UTC+2) to CET (UTC+1), and an hourly one
// across the March change, where 02:00 does not exist.
func TestCronAcrossDST(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skipf("no zone data: %v", err)
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		s := f.service(Config{Refresh: time.Hour})
		// The bubble starts at 2000-01-01 UTC; move to 2026-10-22.
		time.Sleep(time.Date(2026, 10, 22, 0, 0, 0, 0, time.UTC).Sub(time.Now()))
		if _, _, err := s.Put(t.Context(), Def{Name: "daily", Topic: "t", Cron: "0 0 9 * * *", Timezone: "Europe/Berlin"}); err != nil {
			t.Fatal(err)
		}
		stop := run(s)
		time.Sleep(8 * 24 * time.Hour)
		stop()
		var want []string
		for d := 22; d <= 29; d++ {
			want = append(want, JobID("daily", time.Date(2026, 10, d, 9, 0, 0, 0, berlin)))
		}
		sort.Strings(want)
		sameIDs(t, f.rec.ids(), want)
		// 09:00 is 07:00 UTC before the change (Oct 25) and 08:00 after.
		for _, p := range f.rec.puts {
			l := p.due.In(berlin)
			if l.Hour() != 9 || l.Minute() != 0 {
				t.Errorf("job %s due %v, not 09:00 in Berlin", p.id, l)
			}
		}
	})
	// A fixed local time fires once a day across both changes: on the
	// night the clocks go back 02:30 happens twice and fires once; on
	// the night they go forward it does not exist and fires at 03:30.
	for _, tc := range []struct {
		from time.Time
		want []time.Time
	}{
		{time.Date(2026, 10, 24, 0, 0, 0, 0, time.UTC), []time.Time{
			time.Date(2026, 10, 24, 0, 30, 0, 0, time.UTC), // 02:30 CEST
			time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // 02:30 CEST, not again at 02:30 CET
			time.Date(2026, 10, 26, 1, 30, 0, 0, time.UTC), // 02:30 CET
		}},
		{time.Date(2026, 3, 28, 0, 0, 0, 0, time.UTC), []time.Time{
			time.Date(2026, 3, 28, 1, 30, 0, 0, time.UTC), // 02:30 CET
			time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC), // 03:30 CEST: 02:30 does not exist
			time.Date(2026, 3, 30, 0, 30, 0, 0, time.UTC), // 02:30 CEST
		}},
	} {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture()
			s := f.service(Config{Refresh: time.Hour})
			time.Sleep(tc.from.Sub(time.Now()))
			if _, _, err := s.Put(t.Context(), Def{Name: "late", Topic: "t", Cron: "0 30 2 * * *", Timezone: "Europe/Berlin"}); err != nil {
				t.Fatal(err)
			}
			stop := run(s)
			time.Sleep(3 * 24 * time.Hour)
			stop()
			var want []string
			for _, w := range tc.want {
				want = append(want, JobID("late", w))
			}
			sort.Strings(want)
			sameIDs(t, f.rec.ids(), want)
		})
	}
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		s := f.service(Config{Refresh: time.Hour})
		time.Sleep(time.Date(2026, 3, 28, 22, 0, 0, 0, time.UTC).Sub(time.Now()))
		if _, _, err := s.Put(t.Context(), Def{Name: "hourly", Topic: "t", Cron: "@hourly", Timezone: "Europe/Berlin"}); err != nil {
			t.Fatal(err)
		}
		stop := run(s)
		time.Sleep(6 * time.Hour) // 23:00 CET Mar 28 .. 05:00 CEST Mar 29
		stop()
		// Every real hour from 23:00Z to 04:00Z fires once; 02:00 local
		// does not exist that night, so no tick is local 02:xx.
		var want []string
		for h := 23; h <= 28; h++ {
			want = append(want, JobID("hourly", time.Date(2026, 3, 28, h, 0, 0, 0, time.UTC)))
		}
		sort.Strings(want)
		got := f.rec.ids()
		seen := map[string]bool{}
		for _, id := range got {
			if seen[id] {
				t.Fatalf("tick %s fired twice", id)
			}
			seen[id] = true
		}
		for _, p := range f.rec.puts {
			if l := p.due.In(berlin); l.Minute() != 0 || l.Second() != 0 {
				t.Errorf("job %s due %v, not on the hour", p.id, l)
			}
		}
		if len(got) < 5 || len(got) > 6 {
			t.Fatalf("fired %v; want the 5 or 6 real hours of the night", got)
		}
	})
}

// TestMissedPolicies stops the scheduler for 10 minutes of a per-minute
// schedule and starts a new one (a restart), for each policy.
func TestMissedPolicies(t *testing.T) {
	for _, tc := range []struct {
		missed string
		want   func(start time.Time) []string
	}{
		// Ticks 1-3 before the outage, 4-13 during it, 14-16 after.
		{MissedSkip, func(s time.Time) []string {
			return append(ticks("m", s, time.Minute, 1, 3), ticks("m", s, time.Minute, 14, 16)...)
		}},
		{MissedOne, func(s time.Time) []string {
			return append(ticks("m", s, time.Minute, 1, 3), ticks("m", s, time.Minute, 13, 16)...)
		}},
		{MissedAll, func(s time.Time) []string { return ticks("m", s, time.Minute, 1, 16) }},
	} {
		t.Run(tc.missed, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := newFixture()
				// The bubble's clock starts on a whole minute.
				start := time.Now()
				s := f.service(Config{})
				if _, _, err := s.Put(t.Context(), Def{Name: "m", Topic: "t", Cron: "0 * * * * *", Missed: tc.missed}); err != nil {
					t.Fatal(err)
				}
				stop := run(s)
				time.Sleep(3*time.Minute + 10*time.Second)
				stop()
				f.rec.finishAll(t)
				time.Sleep(10 * time.Minute)
				s2 := f.service(Config{})
				stop = run(s2)
				time.Sleep(3 * time.Minute)
				stop()
				skips, fires := testutil.ToFloat64(s2.met.ticks.WithLabelValues(outcomeSkipped)), testutil.ToFloat64(s2.met.ticks.WithLabelValues(outcomeFired))
				wantSkips := map[string]float64{MissedSkip: 1, MissedOne: 0, MissedAll: 0}[tc.missed]
				wantFires := map[string]float64{MissedSkip: 3, MissedOne: 4, MissedAll: 13}[tc.missed]
				if skips != wantSkips || fires != wantFires {
					t.Errorf("after the restart the metrics count %v skips and %v fires, want %v and %v", skips, fires, wantSkips, wantFires)
				}
				want := tc.want(start)
				sort.Strings(want)
				sameIDs(t, f.rec.ids(), want)
			})
		})
	}
}

// TestMissedAllBounded: after an outage of 2,000 ticks, "all" fires the
// latest MaxMissed of them.
func TestMissedAllBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		start := time.Now()
		s := f.service(Config{})
		if _, _, err := s.Put(t.Context(), Def{Name: "b", Topic: "t", Every: 100 * time.Millisecond, Missed: MissedAll}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200*time.Second + 50*time.Millisecond) // 2,000 ticks, no scheduler running
		stop := run(f.service(Config{}))
		time.Sleep(time.Millisecond)
		stop()
		// Ticks older than Grace (1 s) are missed: 1..1990; the latest
		// 1,000 of them fire, then the 10 within Grace and the 5 within
		// Lead (put ahead, due at their ticks).
		want := ticks("b", start, 100*time.Millisecond, 991, 2005)
		sameIDs(t, f.rec.ids(), want)
	})
}

// TestClaimRace runs two schedulers on one store; one is killed and
// started again at odd times. Every tick fires once: never a gap, never
// twice, though consumers finish each job at once.
func TestClaimRace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		start := time.Now()
		a := f.service(Config{})
		if _, _, err := a.Put(t.Context(), Def{Name: "r", Topic: "t", Every: 100 * time.Millisecond}); err != nil {
			t.Fatal(err)
		}
		stopA := run(a)
		for i := range 20 {
			stopB := run(f.service(Config{}))
			time.Sleep(time.Duration(37+i*13) * time.Millisecond)
			stopB()
			f.rec.finishAll(t)
			time.Sleep(time.Duration(11+i*7) * time.Millisecond)
		}
		end := time.Now()
		stopA()
		n := int(end.Sub(start) / (100 * time.Millisecond))
		got := f.rec.ids()
		// The ticks put ahead (within Lead of the end) may be there too.
		if len(got) < n {
			t.Fatalf("fired %d ticks, want at least %d", len(got), n)
		}
		sameIDs(t, got, ticks("r", start, 100*time.Millisecond, 1, len(got)))
	})
}

func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		start := time.Now()
		s := f.service(Config{})
		if _, _, err := s.Put(t.Context(), Def{Name: "p", Topic: "t", Every: time.Second, Missed: MissedAll}); err != nil {
			t.Fatal(err)
		}
		stop := run(s)
		defer stop()
		// Pause before tick 4's job is put (Lead ahead, at 3.5 s).
		time.Sleep(3*time.Second + 200*time.Millisecond)
		if _, err := s.SetPaused(t.Context(), "p", true); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Second)
		if _, err := s.SetPaused(t.Context(), "p", false); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2*time.Second + 100*time.Millisecond) // to 10.3 s
		// 1-3 before the pause, none of 4-8 (paused, and not missed ticks
		// at resume), 9-10 after.
		want := append(ticks("p", start, time.Second, 1, 3), ticks("p", start, time.Second, 9, 10)...)
		sort.Strings(want)
		sameIDs(t, f.rec.ids(), want)
	})
}

func TestReplaceKeepsLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		s := f.service(Config{})
		sc, created, err := s.Put(t.Context(), Def{Name: "x", Topic: "t", Every: time.Second})
		if err != nil || !created {
			t.Fatal(err, created)
		}
		stop := run(s)
		defer stop()
		time.Sleep(2500 * time.Millisecond)
		sc2, created, err := s.Put(t.Context(), Def{Name: "x", Topic: "u", Every: time.Second, Body: []byte("b")})
		if err != nil || created {
			t.Fatalf("replace = %v, created %v", err, created)
		}
		if !sc2.Anchor.Equal(sc.Anchor) || sc2.Last.IsZero() {
			t.Fatalf("replace with the same timing changed the anchor or lost last: %+v", sc2)
		}
		if next := s.Next(sc2, 5); len(next) != 5 || !next[0].After(sc2.Last) {
			t.Fatalf("Next = %v", next)
		}
	})
}

// TestBadInput: every refused definition has a named code and leaves
// nothing behind.
func TestBadInput(t *testing.T) {
	f := newFixture()
	s := f.service(Config{})
	for _, tc := range []struct {
		def  Def
		code string
	}{
		{Def{Name: "a", Topic: "t", Cron: "0 0 0 31 2 *"}, "cron_never_fires"},
		{Def{Name: "a", Topic: "t", Cron: "0 0 30 2 *"}, "cron_never_fires"},
		{Def{Name: "a", Topic: "t", Cron: "61 * * * * *"}, "bad_cron"},
		{Def{Name: "a", Topic: "t", Cron: "not cron"}, "bad_cron"},
		{Def{Name: "a", Topic: "t", Cron: "TZ=UTC * * * * *"}, "bad_cron"},
		{Def{Name: "a", Topic: "t"}, "bad_cron"},
		{Def{Name: "a", Topic: "t", Cron: "@hourly", Every: time.Second}, "bad_cron"},
		{Def{Name: "a", Topic: "t", Every: -time.Second}, "bad_every"},
		{Def{Name: "a", Topic: "t", Every: time.Millisecond}, "bad_every"},
		{Def{Name: "a", Topic: "t", Cron: "@every 10ms"}, "bad_cron"},
		{Def{Name: "a", Topic: "t", Cron: "@daily", Timezone: "Mars/Olympus"}, "bad_timezone"},
		{Def{Name: "a", Topic: "t", Cron: "@daily", Timezone: "Local"}, "bad_timezone"},
		{Def{Name: "a:b", Topic: "t", Cron: "@daily"}, "bad_schedule_name"},
		{Def{Name: "", Topic: "t", Cron: "@daily"}, "bad_schedule_name"},
		{Def{Name: "a", Topic: "-t", Cron: "@daily"}, "bad_topic"},
		{Def{Name: "a", Topic: "t", Cron: "@daily", TTR: -time.Second}, "bad_ttr"},
		{Def{Name: "a", Topic: "t", Cron: "@daily", MaxAttempts: -1}, "bad_max_attempts"},
		{Def{Name: "a", Topic: "t", Cron: "@daily", Missed: "some"}, "bad_missed"},
		{Def{Name: "a", Topic: "t", Cron: "@daily", Body: make([]byte, delayq.MaxBodyDefault+1)}, "body_too_big"},
	} {
		_, _, err := s.Put(t.Context(), tc.def)
		var ve *delayq.ValidationError
		if !errors.As(err, &ve) || ve.Code != tc.code {
			t.Errorf("Put(%+v) = %v, want code %s", tc.def, err, tc.code)
		}
	}
	if l, _ := s.List(t.Context()); len(l) != 0 {
		t.Fatalf("refused puts left %d schedules", len(l))
	}
	if _, err := s.Get(t.Context(), "nope"); !errors.Is(err, delayq.ErrNotFound) || err.Error() != `schedule "nope" not found` {
		t.Fatalf("Get(unknown) = %v", err)
	}
	if err := s.Delete(t.Context(), "nope"); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Delete(unknown) = %v", err)
	}
	var _ store.DocStore = f.st
}

func TestJobIDFits(t *testing.T) {
	long := ""
	for range MaxNameLen {
		long += "a"
	}
	id := JobID(long, time.Date(9999, 12, 31, 23, 59, 59, 999e6, time.UTC))
	if !delayq.ValidID(id) {
		t.Fatalf("JobID of the longest name at year 9999 = %q (%d bytes) is not a valid job id", id, len(id))
	}
}

// crasher is a put path that dies: on every third put it cancels its
// scheduler (before or after the put), as a process killed mid-tick.
type crasher struct {
	p      Putter
	n      int
	cancel context.CancelFunc
	after  bool
}

func (c *crasher) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	return c.p.Get(ctx, ref)
}

func (c *crasher) Put(ctx context.Context, reqs []engine.PutRequest) ([]*delayq.Job, error) {
	c.n++
	if c.n%3 != 0 {
		return c.p.Put(ctx, reqs)
	}
	if c.after {
		c.p.Put(ctx, reqs)
	}
	c.cancel()
	return nil, context.Canceled
}

// TestTakeoverAfterCrash: a scheduler dies between claim and confirm,
// before or after its put, again and again; the other one takes each
// claim over. Every tick fires once while consumers finish due jobs.
func TestTakeoverAfterCrash(t *testing.T) {
	for _, after := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			f := newFixture()
			start := time.Now()
			a := f.service(Config{})
			if _, _, err := a.Put(t.Context(), Def{Name: "k", Topic: "t", Every: 100 * time.Millisecond}); err != nil {
				t.Fatal(err)
			}
			var stopA func()
			crashes := 0
			for range 15 {
				ctx, cancel := context.WithCancel(context.Background())
				b := New(store.Schedules(f.st), &crasher{p: f.rec, cancel: cancel, after: after}, Config{Logger: slog.New(slog.DiscardHandler)})
				done := make(chan struct{})
				go func() { b.Run(ctx); close(done) }()
				<-done // b dies on its third put
				crashes++
				if stopA == nil {
					stopA = run(a) // a starts after b's first death
				}
				time.Sleep(170 * time.Millisecond)
				f.rec.finishAll(t)
			}
			time.Sleep(time.Second)
			f.rec.finishAll(t)
			end := time.Now()
			stopA()
			got := f.rec.ids()
			n := int(end.Sub(start) / (100 * time.Millisecond))
			if len(got) < n {
				t.Fatalf("fired %d ticks, want at least %d", len(got), n)
			}
			sameIDs(t, got, ticks("k", start, 100*time.Millisecond, 1, len(got)))
			if crashes != 15 {
				t.Fatalf("crashes = %d", crashes)
			}
		})
	}
}

// inFlight answers "exists" to the first put of every third tick without
// storing it: what a Redis store answers while another instance's put of
// the same id has claimed it and not stored it yet, a put that may then
// fail (that instance was shutting down).
type inFlight struct {
	p    Putter
	n    int
	seen map[string]bool
}

func (f *inFlight) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	return f.p.Get(ctx, ref)
}

func (f *inFlight) Put(ctx context.Context, reqs []engine.PutRequest) ([]*delayq.Job, error) {
	f.n++
	if id := reqs[0].ID; f.n%3 == 0 && !f.seen[id] {
		f.seen[id] = true
		return nil, delayq.ForJob(delayq.Ref{ID: id}, delayq.ErrExists)
	}
	return f.p.Put(ctx, reqs)
}

// TestExistsWithoutTheJobIsNotFired: "exists" for a tick's job that is not
// there does not count the tick as fired; the claim is retried at its
// lease's end and the tick fires once. Counting it fired lost one tick in
// three here (and lost one in a CI run over Redis, when an instance shut
// down mid-put).
func TestExistsWithoutTheJobIsNotFired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		s := New(store.Schedules(f.st), &inFlight{p: f.rec, seen: map[string]bool{}}, Config{Logger: slog.New(slog.DiscardHandler)})
		start := delayq.TruncMilli(time.Now())
		if _, _, err := s.Put(t.Context(), Def{Name: "k", Topic: "t", Every: time.Second}); err != nil {
			t.Fatal(err)
		}
		stop := run(s)
		time.Sleep(10*time.Second + 100*time.Millisecond)
		stop()
		sameIDs(t, f.rec.ids(), ticks("k", start, time.Second, 1, 10))
	})
}

// slowPut holds every put until release is closed and notes whether the
// put's context was canceled by then: a scheduler shut down mid-tick.
type slowPut struct {
	p        Putter
	started  chan struct{} // closed at the first put
	release  chan struct{}
	once     sync.Once
	canceled bool // read after the put returned
}

func (s *slowPut) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	return s.p.Get(ctx, ref)
}

func (s *slowPut) Put(ctx context.Context, reqs []engine.PutRequest) ([]*delayq.Job, error) {
	s.once.Do(func() { close(s.started) })
	<-s.release
	s.canceled = ctx.Err() != nil
	return s.p.Put(ctx, reqs)
}

// TestShutdownFinishesTheTickInFlight: a scheduler stopped while a tick's
// put is in flight lets the put and the confirm finish, so no claim is
// left for another instance to wait out: over Redis a put cut off after
// claiming its id holds the id, and so the schedule, for 10 s, the likely
// cause of a CI run of TestScheduleExactlyOnceOverRedis that fired 35 of
// its 100 ticks.
func TestShutdownFinishesTheTickInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := newFixture()
		sp := &slowPut{p: f.rec, started: make(chan struct{}), release: make(chan struct{})}
		s := New(store.Schedules(f.st), sp, Config{Logger: slog.New(slog.DiscardHandler)})
		if _, _, err := s.Put(t.Context(), Def{Name: "k", Topic: "t", Every: time.Second}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { s.Run(ctx); close(done) }()
		<-sp.started
		cancel()
		synctest.Wait() // Run is held in the put
		close(sp.release)
		<-done
		if sp.canceled {
			t.Error("the tick's put ran on a canceled context")
		}
		if got := f.rec.ids(); len(got) != 1 {
			t.Errorf("stored %v, want the tick's job", got)
		}
		sc, err := s.Get(t.Context(), "k")
		if err != nil {
			t.Fatal(err)
		}
		if sc.Pending || sc.Last.IsZero() {
			t.Errorf("schedule after the stop: last %v, pending %v; want the tick confirmed", sc.Last, sc.Pending)
		}
	})
}
