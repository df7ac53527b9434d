package diskstore

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestDiskFullRefusesPutsOnly drops the free space below the floor: puts
// are refused with ErrDiskFull and change nothing, reserves and finishes
// of the jobs already there still work, Health says why, and once space
// returns puts are taken again, with no restart.
func TestDiskFullRefusesPutsOnly(t *testing.T) {
	ctx := t.Context()
	var free atomic.Uint64
	free.Store(1 << 30)
	s := openAt(t, t.TempDir(), Options{MinFree: 100 << 20, freeBytes: func(string) (uint64, error) { return free.Load(), nil }})
	defer s.Close()
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	job := func(id string) *delayq.Job {
		return &delayq.Job{ID: id, Topic: "t", Body: []byte(id), TTR: time.Minute, State: delayq.StateReady, Due: now, Created: now}
	}
	setFree := func(n uint64) {
		free.Store(n)
		s.mu.Lock()
		s.space.checked = time.Time{} // as if spaceCheckEvery had passed
		s.mu.Unlock()
	}
	if err := s.Put(ctx, []*delayq.Job{job("a"), job("b")}); err != nil {
		t.Fatal(err)
	}
	if h := s.Health(); h != "" {
		t.Fatalf("Health() = %q with room to spare, want \"\"", h)
	}

	setFree(50 << 20)
	err := s.PutFresh(ctx, []*delayq.Job{job("c")})
	if !errors.Is(err, delayq.ErrDiskFull) || !strings.Contains(err.Error(), "50 MiB free") {
		t.Fatalf("Put below the floor = %v, want ErrDiskFull naming the free space", err)
	}
	if _, err := s.Get(ctx, delayq.Ref{ID: "c"}); !errors.Is(err, delayq.ErrNotFound) {
		t.Fatalf("Get(c) after a refused put = %v, want ErrNotFound", err)
	}
	if h := s.Health(); !strings.Contains(h, "below the floor of 100 MiB") {
		t.Fatalf("Health() below the floor = %q", h)
	}
	js, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 2, Now: now})
	if err != nil || len(js) != 2 {
		t.Fatalf("Reserve below the floor = %d jobs, %v; want 2", len(js), err)
	}
	if _, err := s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: js[0].ID, Reservation: js[0].Reservation}}); err != nil {
		t.Fatalf("finish below the floor = %v", err)
	}

	setFree(200 << 20)
	if err := s.Put(ctx, []*delayq.Job{job("c")}); err != nil {
		t.Fatalf("Put once space returned = %v", err)
	}
	if h := s.Health(); h != "" {
		t.Fatalf("Health() once space returned = %q", h)
	}
}
