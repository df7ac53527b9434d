package store_test

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// base is the time the effect tests act around.
var base = time.UnixMilli(1_700_000_000_000).UTC()

func ms(n int64) time.Time { return base.Add(time.Duration(n) * time.Millisecond) }

// held returns a job reserved on its attempt-th reserve, deadline at 30 s.
func held(attempts, maxAttempts int) *delayq.Job {
	return &delayq.Job{
		ID: "x", Seq: 7, Topic: "t", Priority: 10, TTR: 30 * time.Second,
		MaxAttempts: maxAttempts, Attempts: attempts, State: delayq.StateReserved,
		Due: ms(0), Reservation: delayq.ReservationToken(7, attempts), Deadline: ms(30_000),
	}
}

// expect compares the job an effect left with want, field by field.
func expect(t *testing.T, what string, got, want *delayq.Job) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("%s:\n got %+v\nwant %+v", what, got, want)
	}
}

func TestClockNeverGoesBack(t *testing.T) {
	var c store.Clock
	steps := []struct{ in, want time.Time }{
		{ms(100).Add(400 * time.Microsecond), ms(100)}, // truncated to store precision
		{ms(50), ms(100)},  // an earlier Now acts at the latest
		{ms(200), ms(200)}, // a later one moves the clock on
		{ms(199), ms(200)},
	}
	for i, s := range steps {
		if got := c.At(s.in); !got.Equal(s.want) {
			t.Errorf("step %d: At(%v) = %v, want %v", i, s.in, got, s.want)
		}
	}
}

func TestTruncate(t *testing.T) {
	sub := 700 * time.Microsecond
	j := &delayq.Job{Due: ms(1).Add(sub), Created: ms(2).Add(sub), Deadline: ms(3).Add(sub),
		TTR: time.Second + sub, Delay: 5*time.Millisecond + sub}
	store.Truncate(j)
	expect(t, "Truncate", j, &delayq.Job{Due: ms(1), Created: ms(2), Deadline: ms(3),
		TTR: time.Second, Delay: 5 * time.Millisecond})
}

func TestApplyRelease(t *testing.T) {
	pri := uint32(3)
	now := ms(1000)
	cases := []struct {
		name        string
		maxAttempts int
		p           store.ReleaseParams
		state       delayq.State
		due         time.Time
		buries      int
		priority    uint32
	}{
		{"ready at its due", 0, store.ReleaseParams{Due: ms(1000)}, delayq.StateReady, ms(1000), 0, 10},
		{"due in the past is ready at that due", 0, store.ReleaseParams{Due: ms(400)}, delayq.StateReady, ms(400), 0, 10},
		{"delayed", 5, store.ReleaseParams{Due: ms(6000), Delay: 5 * time.Second, Priority: &pri},
			delayq.StateDelayed, ms(6000), 0, 3},
		{"attempts spent: buried now", 2, store.ReleaseParams{Due: ms(6000), Delay: 5 * time.Second, Reason: "gave up"},
			delayq.StateBuried, now, 1, 10},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j := held(2, c.maxAttempts)
			store.ApplyRelease(j, c.p, now)
			want := held(2, c.maxAttempts)
			want.State, want.Due, want.Priority = c.state, c.due, c.priority
			want.Reservation, want.Deadline = "", time.Time{}
			// A release that buries counts as a bury only (docs/states.md).
			want.Releases, want.Buries, want.Delay = 1-c.buries, c.buries, c.p.Delay
			want.LastReason, want.LastFailed = c.p.Reason, now
			expect(t, "ApplyRelease", j, want)
		})
	}
}

func TestApplyUpdate(t *testing.T) {
	now := ms(1000)
	pri := uint32(1)
	buried := func() *delayq.Job {
		return &delayq.Job{ID: "x", Topic: "t", Body: []byte("old"), Priority: 10,
			State: delayq.StateBuried, Due: ms(0), Delay: time.Second, Buries: 1}
	}
	at := func(t time.Time) *time.Time { return &t }
	cases := []struct {
		name string
		p    store.UpdateParams
		edit func(j *delayq.Job)
	}{
		{"nothing set keeps everything", store.UpdateParams{}, func(*delayq.Job) {}},
		{"an empty body replaces the body", store.UpdateParams{Body: []byte{}, Priority: &pri},
			func(j *delayq.Job) { j.Body, j.Priority = []byte{}, 1 }},
		{"a due at now is ready", store.UpdateParams{Due: at(now), Delay: 0},
			func(j *delayq.Job) { j.State, j.Due, j.Delay = delayq.StateReady, now, 0 }},
		{"a later due is delayed", store.UpdateParams{Due: at(ms(1500).Add(time.Microsecond)), Delay: 500 * time.Millisecond},
			func(j *delayq.Job) { j.State, j.Due, j.Delay = delayq.StateDelayed, ms(1500), 500*time.Millisecond }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			j, want := buried(), buried()
			store.ApplyUpdate(j, c.p, now)
			c.edit(want)
			expect(t, "ApplyUpdate", j, want)
		})
	}
	t.Run("the body is copied", func(t *testing.T) {
		j, body := buried(), []byte("new")
		store.ApplyUpdate(j, store.UpdateParams{Body: body}, now)
		body[0] = 'N'
		if string(j.Body) != "new" {
			t.Errorf("job body %q follows the caller's slice", j.Body)
		}
	})
}

func TestApplyTimeout(t *testing.T) {
	t.Run("ready at the deadline", func(t *testing.T) {
		j := held(1, 3)
		store.ApplyTimeout(j)
		want := held(1, 3)
		want.State, want.Due, want.Timeouts = delayq.StateReady, ms(30_000), 1
		want.LastReason, want.LastFailed = delayq.ReasonTTRExpired, ms(30_000)
		want.Reservation, want.Deadline = "", time.Time{}
		expect(t, "ApplyTimeout", j, want)
	})
	t.Run("attempts spent: buried at the deadline", func(t *testing.T) {
		j := held(3, 3)
		store.ApplyTimeout(j)
		want := held(3, 3)
		// A TTR expiry that buries counts as a bury only (docs/states.md).
		want.State, want.Due, want.Timeouts, want.Buries = delayq.StateBuried, ms(30_000), 0, 1
		want.LastReason, want.LastFailed = delayq.ReasonTTRExpired, ms(30_000)
		want.Reservation, want.Deadline = "", time.Time{}
		expect(t, "ApplyTimeout", j, want)
	})
}

func TestApplyReserveAndStart(t *testing.T) {
	j := &delayq.Job{ID: "x", Seq: 7, TTR: 30 * time.Second, State: delayq.StateReady, Due: ms(500), Attempts: 1}
	start := store.ReserveStart(j, ms(400))
	if !start.Equal(ms(500)) {
		t.Errorf("ReserveStart before Due = %v, want the Due %v", start, ms(500))
	}
	if s := store.ReserveStart(j, ms(900)); !s.Equal(ms(900)) {
		t.Errorf("ReserveStart after Due = %v, want now %v", s, ms(900))
	}
	store.ApplyReserve(j, start)
	expect(t, "ApplyReserve", j, &delayq.Job{ID: "x", Seq: 7, TTR: 30 * time.Second,
		State: delayq.StateReserved, Due: ms(500), Attempts: 2,
		Reservation: delayq.ReservationToken(7, 2), Deadline: ms(30_500)})
}

func TestGuards(t *testing.T) {
	in := func(st delayq.State) *delayq.Job {
		j := held(1, 0)
		if st != delayq.StateReserved {
			j.State, j.Reservation, j.Deadline = st, "", time.Time{}
		}
		return j
	}
	mine := delayq.Ref{ID: "x", Reservation: delayq.ReservationToken(7, 1)}
	other := delayq.Ref{ID: "x", Reservation: delayq.ReservationToken(7, 2)}
	plain := delayq.Ref{ID: "x"}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"CheckHeld(mine)", store.CheckHeld(in(delayq.StateReserved), mine), nil},
		{"CheckHeld(other)", store.CheckHeld(in(delayq.StateReserved), other), delayq.ErrNotReserved},
		{"CheckHeld(none)", store.CheckHeld(in(delayq.StateReserved), plain), delayq.ErrNotReserved},
		{"CheckHeld(ready)", store.CheckHeld(in(delayq.StateReady), mine), delayq.ErrNotReserved},
		{"CheckDeletable(force)", store.CheckDeletable(in(delayq.StateReserved), store.DeleteParams{Ref: other, Force: true}), nil},
		{"CheckDeletable(mine)", store.CheckDeletable(in(delayq.StateReserved), store.DeleteParams{Ref: mine}), nil},
		{"CheckDeletable(other)", store.CheckDeletable(in(delayq.StateReserved), store.DeleteParams{Ref: other}), delayq.ErrNotReserved},
		{"CheckDeletable(reserved, no reservation)", store.CheckDeletable(in(delayq.StateReserved), store.DeleteParams{Ref: plain}), delayq.ErrNotReserved},
		{"CheckDeletable(buried, no reservation)", store.CheckDeletable(in(delayq.StateBuried), store.DeleteParams{Ref: plain}), nil},
		{"CheckDeletable(ready, a reservation)", store.CheckDeletable(in(delayq.StateReady), store.DeleteParams{Ref: mine}), delayq.ErrNotReserved},
		{"CheckKickable(buried)", store.CheckKickable(in(delayq.StateBuried)), nil},
		{"CheckKickable(delayed)", store.CheckKickable(in(delayq.StateDelayed)), nil},
		{"CheckKickable(ready)", store.CheckKickable(in(delayq.StateReady)), delayq.ErrState},
		{"CheckKickable(reserved)", store.CheckKickable(in(delayq.StateReserved)), delayq.ErrState},
		{"CheckReservable(buried)", store.CheckReservable(in(delayq.StateBuried)), nil},
		{"CheckReservable(reserved)", store.CheckReservable(in(delayq.StateReserved)), delayq.ErrState},
		{"CheckUpdatable(delayed)", store.CheckUpdatable(in(delayq.StateDelayed)), nil},
		{"CheckUpdatable(reserved)", store.CheckUpdatable(in(delayq.StateReserved)), delayq.ErrNotReserved},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) || (c.want == nil) != (c.err == nil) {
			t.Errorf("%s = %v, want %v", c.name, c.err, c.want)
		}
		if c.err != nil && c.err.Error()[:len(`job "x": `)] != `job "x": ` {
			t.Errorf("%s = %q, want it to name the job first", c.name, c.err)
		}
	}
}
