package memstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/delayq/delayq/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(_ context.Context, name string) (*store.Schedule, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	sc, ok := s.scheds[name]
	if !ok {
		return nil, fmt.Errorf("memstore: %q: %w", name, store.ErrScheduleNotFound)
	}
	return sc.Clone(), nil
}

// ListSchedules implements store.ScheduleStore.
func (s *Store) ListSchedules(_ context.Context) ([]*store.Schedule, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]*store.Schedule, 0, len(s.scheds))
	for _, sc := range s.scheds {
		out = append(out, sc.Clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SaveSchedule implements store.ScheduleStore.
func (s *Store) SaveSchedule(_ context.Context, sc *store.Schedule, prev uint64) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var cur uint64
	if old, ok := s.scheds[sc.Name]; ok {
		cur = old.Rev
	}
	if cur != prev {
		return fmt.Errorf("memstore: %q: %w", sc.Name, store.ErrScheduleConflict)
	}
	if s.scheds == nil {
		s.scheds = make(map[string]*store.Schedule)
	}
	s.scheds[sc.Name] = sc.Clone()
	return nil
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(_ context.Context, name string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.scheds[name]; !ok {
		return fmt.Errorf("memstore: %q: %w", name, store.ErrScheduleNotFound)
	}
	delete(s.scheds, name)
	return nil
}
