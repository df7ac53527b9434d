package engine

import (
	"context"
	"log/slog"
	"maps"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/diskstore"
)

// expiredMetric reads delayq_ttr_expired_total as Prometheus exports it.
func expiredMetric(t *testing.T, e *Engine) float64 {
	t.Helper()
	mfs, err := e.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "delayq_ttr_expired_total" {
			return mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	t.Fatal("delayq_ttr_expired_total is not exported")
	return 0
}

// TestTTRExpiriesCounted: every TTR expiry counts once, whether the job
// goes ready again or is buried for spent attempts; delayed jobs that
// fall due do not count.
func TestTTRExpiriesCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		h.put(PutRequest{ID: "again", TTR: ptr(2 * time.Second)})
		h.put(PutRequest{ID: "spent", TTR: ptr(2 * time.Second), MaxAttempts: ptr(1)})
		sec := time.Second
		h.put(PutRequest{ID: "later", Delay: &sec})
		for range 2 {
			if got := h.reserve(0, "t"); len(got) != 1 {
				t.Fatalf("reserved %d jobs, want 1", len(got))
			}
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if got := expiredMetric(t, h.e); got != 2 {
			t.Errorf("delayq_ttr_expired_total = %v after two expiries, want 2", got)
		}
		if got := h.e.Metrics().TimeoutsTotal(); got != 2 {
			t.Errorf("TimeoutsTotal() = %d, want 2", got)
		}
		j, err := h.e.Get(context.Background(), delayq.Ref{ID: "spent"})
		if err != nil || j.State != delayq.StateBuried {
			t.Fatalf("job spent = %+v, %v; want buried", j, err)
		}
	})
}

// TestTTRExpiriesCountedOnDisk runs the count against the durable store,
// whose Tick reports its work its own way.
func TestTTRExpiriesCountedOnDisk(t *testing.T) {
	st, err := diskstore.Open(t.TempDir(), diskstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e := New(st, Config{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.Run(ctx) }()
	defer func() { cancel(); <-done; st.Close() }()
	half := 500 * time.Millisecond
	if _, err := e.Put(ctx, []PutRequest{
		{ID: "a", Topic: "t", TTR: ptr(time.Second), Priority: ptr[uint32](1)},
		{ID: "b", Topic: "t", TTR: ptr(time.Second), Priority: ptr[uint32](2), MaxAttempts: ptr(1)},
		{ID: "c", Topic: "t", TTR: ptr(time.Second), Delay: &half},
	}); err != nil {
		t.Fatal(err)
	}
	if got, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, N: 2}); err != nil || len(got) != 2 {
		t.Fatalf("Reserve = %d jobs, %v; want 2", len(got), err)
	}
	// Job a comes back when its TTR runs out: wait for that, not a sleep.
	got, err := e.Reserve(ctx, ReserveRequest{Topics: []string{"t"}, N: 2, Wait: 5 * time.Second})
	if err != nil || len(got) == 0 {
		t.Fatalf("Reserve after the TTR = %v, %v", got, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for e.Metrics().TimeoutsTotal() < 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // b's expiry may be a step after a's
	}
	if n := expiredMetric(t, e); n != 2 {
		t.Fatalf("delayq_ttr_expired_total = %v, want 2 (a and b expired, c only fell due)", n)
	}
}

// TestTTRExpiredByTopic: a timer step's expiries per topic are its ready
// jobs without a lateness (those were delayed jobs firing), its buried
// jobs, and the jobs its backoff delayed.
func TestTTRExpiredByTopic(t *testing.T) {
	res := &store.TickResult{
		Ready:            map[string]int{"a": 3, "b": 1},
		LatenessByTopic:  map[string][]time.Duration{"a": {0, time.Millisecond}, "b": {0}},
		BuriedByTopic:    map[string]int{"b": 2},
		BackedOffByTopic: map[string]int{"a": 4, "c": 1},
	}
	got := ttrExpired(res)
	want := map[string]int{"a": 5, "b": 2, "c": 1}
	if !maps.Equal(got, want) {
		t.Errorf("ttrExpired = %v, want %v", got, want)
	}
}
