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
	err = s.outside(ctx, func() error {
		sc, err = s.readSched(name)
		return err
	})
	return sc, err
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(ctx context.Context) (out []*store.Schedule, err error) {
	out = []*store.Schedule{}
	err = s.outside(ctx, func() error {
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
	return s.outside(ctx, func() error {
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
	return s.outside(ctx, func() error {
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
