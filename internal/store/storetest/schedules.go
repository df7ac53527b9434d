package storetest

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// testSchedules pins store.ScheduleStore over each store's DocStore:
// compare-and-set on Rev, not found, list order, deep copies, and
// durability across a reopen.
func testSchedules(t *testing.T, f Factory) {
	open := func(t *testing.T) (store.Store, store.ScheduleStore) {
		s := f.Open(t)
		return s, store.Schedules(s)
	}
	sched := func(name string) *store.Schedule {
		return &store.Schedule{
			Name: name, Topic: "t", Body: []byte("b\x00\xff"), TTR: 1500 * 1e6, Priority: 7, MaxAttempts: 3,
			Spec: "0 */5 * * * *", Timezone: "Europe/Berlin", Missed: "all",
			Created: at(0), Updated: at(1), Anchor: at(2), Since: at(3), Last: at(4), Pending: true, Lease: at(5),
			Rev: store.NewRev(),
		}
	}

	t.Run("CompareAndSet", func(t *testing.T) {
		s, ss := open(t)
		defer s.Close()
		ctx := t.Context()
		if _, err := ss.GetSchedule(ctx, "a"); !errors.Is(err, store.ErrScheduleNotFound) || !errors.Is(err, delayq.ErrNotFound) {
			t.Fatalf("GetSchedule(unknown) = %v, want ErrScheduleNotFound wrapping ErrNotFound", err)
		}
		a := sched("a")
		if err := ss.SaveSchedule(ctx, a, 0); err != nil {
			t.Fatalf("SaveSchedule(create) = %v", err)
		}
		if err := ss.SaveSchedule(ctx, sched("a"), 0); !errors.Is(err, store.ErrScheduleConflict) {
			t.Fatalf("SaveSchedule(create again) = %v, want ErrScheduleConflict", err)
		}
		got, err := ss.GetSchedule(ctx, "a")
		if err != nil {
			t.Fatalf("GetSchedule = %v", err)
		}
		if d := cmp.Diff(a, got); d != "" {
			t.Fatalf("GetSchedule after save (-want +got):\n%s", d)
		}
		got.Body[0] = 'X' // a copy: the store's record must not change
		b := sched("a")
		b.Last, b.Pending = at(10), false
		if err := ss.SaveSchedule(ctx, b, a.Rev+1); !errors.Is(err, store.ErrScheduleConflict) {
			t.Fatalf("SaveSchedule(stale rev) = %v, want ErrScheduleConflict", err)
		}
		if err := ss.SaveSchedule(ctx, b, a.Rev); err != nil {
			t.Fatalf("SaveSchedule(rev) = %v", err)
		}
		if err := ss.SaveSchedule(ctx, sched("a"), a.Rev); !errors.Is(err, store.ErrScheduleConflict) {
			t.Fatalf("second SaveSchedule on the same rev = %v, want ErrScheduleConflict (only one racer wins)", err)
		}
		got, _ = ss.GetSchedule(ctx, "a")
		if d := cmp.Diff(b, got); d != "" {
			t.Fatalf("GetSchedule after update (-want +got):\n%s", d)
		}
	})

	t.Run("ListDelete", func(t *testing.T) {
		s, ss := open(t)
		defer s.Close()
		ctx := t.Context()
		if l, err := ss.ListSchedules(ctx); err != nil || len(l) != 0 {
			t.Fatalf("ListSchedules(empty) = %v, %v; want none", l, err)
		}
		for _, n := range []string{"c", "a", "b"} {
			if err := ss.SaveSchedule(ctx, sched(n), 0); err != nil {
				t.Fatalf("SaveSchedule(%s) = %v", n, err)
			}
		}
		if err := ss.DeleteSchedule(ctx, "b"); err != nil {
			t.Fatalf("DeleteSchedule(b) = %v", err)
		}
		if err := ss.DeleteSchedule(ctx, "b"); !errors.Is(err, store.ErrScheduleNotFound) {
			t.Fatalf("DeleteSchedule(b) again = %v, want ErrScheduleNotFound", err)
		}
		l, err := ss.ListSchedules(ctx)
		if err != nil {
			t.Fatalf("ListSchedules = %v", err)
		}
		var names []string
		for _, sc := range l {
			names = append(names, sc.Name)
		}
		if d := cmp.Diff([]string{"a", "c"}, names); d != "" {
			t.Fatalf("ListSchedules names (-want +got):\n%s", d)
		}
		// A deleted name can be created again from nothing.
		if err := ss.SaveSchedule(ctx, sched("b"), 0); err != nil {
			t.Fatalf("SaveSchedule(b) after delete = %v", err)
		}
	})

	t.Run("Durable", func(t *testing.T) {
		if f.Reopen == nil {
			t.Skip("not a durable store")
		}
		s, ss := open(t)
		a := sched("a")
		if err := ss.SaveSchedule(t.Context(), a, 0); err != nil {
			t.Fatalf("SaveSchedule = %v", err)
		}
		s = f.Reopen(t, s)
		defer s.Close()
		got, err := store.Schedules(s).GetSchedule(t.Context(), "a")
		if err != nil {
			t.Fatalf("GetSchedule after reopen = %v", err)
		}
		if d := cmp.Diff(a, got); d != "" {
			t.Fatalf("schedule after reopen (-want +got):\n%s", d)
		}
	})
}
