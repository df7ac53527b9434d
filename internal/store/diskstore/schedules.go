package diskstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

// schedMu serialises schedule compare-and-sets. Schedules are written a
// few times per tick, not per job, so one lock for every store in the
// process costs nothing and keeps the job path's mutex out of it.
var schedMu sync.Mutex

func schedKey(name string) []byte { return append([]byte{prefixSched}, name...) }

// schedCall runs fn on the open store: it refuses a closed or failed store
// and keeps Close waiting until fn is done with the db handle. It joins
// s.bg for that: Close waits for bg before it closes the db, and an Add
// made under mu while the store is open comes before Close's Wait.
// Schedule calls never touch the job path's state, so they hold mu only
// for that check: a synced schedule write does not stall job transitions.
func (s *Store) schedCall(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	if err := s.usable(); err != nil {
		s.mu.Unlock()
		return err
	}
	s.bg.Add(1)
	s.mu.Unlock()
	defer s.bg.Done()
	return fn()
}

// readSched reads a schedule straight from Pebble: the job path's open
// group never holds P keys, so there is nothing of it to commit first.
func (s *Store) readSched(name string) (*store.Schedule, error) {
	v, closer, err := s.db.Get(schedKey(name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("diskstore: %q: %w", name, store.ErrScheduleNotFound)
	}
	if err != nil {
		return nil, unavailable("get schedule", err)
	}
	defer closer.Close()
	var sc store.Schedule
	if err := json.Unmarshal(v, &sc); err != nil {
		return nil, unavailable("decode schedule "+name, err)
	}
	return &sc, nil
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, name string) (sc *store.Schedule, err error) {
	err = s.schedCall(ctx, func() error {
		sc, err = s.readSched(name)
		return err
	})
	return sc, err
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context) (out []*store.Schedule, err error) {
	out = []*store.Schedule{}
	err = s.schedCall(ctx, func() error {
		lo := []byte{prefixSched}
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return unavailable("list schedules", err)
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			var sc store.Schedule
			if err := json.Unmarshal(it.Value(), &sc); err != nil {
				return unavailable("decode schedule "+string(it.Key()[1:]), err)
			}
			out = append(out, &sc)
		}
		if err := it.Error(); err != nil {
			return unavailable("list schedules", err)
		}
		return nil
	})
	return out, err
}

// SaveSchedule implements store.ScheduleStore: a read and a synced write
// under schedMu.
func (s *Store) SaveSchedule(ctx context.Context, sc *store.Schedule, prev uint64) error {
	b, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("diskstore: encode schedule: %w", err)
	}
	return s.schedCall(ctx, func() error {
		schedMu.Lock()
		defer schedMu.Unlock()
		var cur uint64
		old, err := s.readSched(sc.Name)
		switch {
		case err == nil:
			cur = old.Rev
		case !isSchedNotFound(err):
			return err
		}
		if cur != prev {
			return fmt.Errorf("diskstore: %q: %w", sc.Name, store.ErrScheduleConflict)
		}
		if err := s.db.Set(schedKey(sc.Name), b, pebble.Sync); err != nil {
			return unavailable("save schedule", err)
		}
		return nil
	})
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	return s.schedCall(ctx, func() error {
		schedMu.Lock()
		defer schedMu.Unlock()
		if _, err := s.readSched(name); err != nil {
			return err
		}
		if err := s.db.Delete(schedKey(name), pebble.Sync); err != nil {
			return unavailable("delete schedule", err)
		}
		return nil
	})
}

func isSchedNotFound(err error) bool { return errors.Is(err, store.ErrScheduleNotFound) }
