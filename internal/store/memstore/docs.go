package memstore

import (
	"context"
	"fmt"
	"sort"

	"github.com/delayq/delayq/internal/store"
)

var _ store.DocStore = (*Store)(nil)

// GetDoc implements store.DocStore.
func (s *Store) GetDoc(_ context.Context, kind, name string) (*store.Doc, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	d, ok := s.docs[kind][name]
	if !ok {
		return nil, fmt.Errorf("memstore: %s %q: %w", kind, name, store.ErrDocNotFound)
	}
	return store.CloneDoc(d), nil
}

// ListDocs implements store.DocStore.
func (s *Store) ListDocs(_ context.Context, kind string) ([]*store.Doc, error) {
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := make([]*store.Doc, 0, len(s.docs[kind]))
	for _, d := range s.docs[kind] {
		out = append(out, store.CloneDoc(d))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// SaveDoc implements store.DocStore.
func (s *Store) SaveDoc(_ context.Context, kind string, d *store.Doc, prev uint64) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	var cur uint64
	if old, ok := s.docs[kind][d.Name]; ok {
		cur = old.Rev
	}
	if cur != prev {
		return fmt.Errorf("memstore: %s %q: %w", kind, d.Name, store.ErrDocConflict)
	}
	if s.docs == nil {
		s.docs = make(map[string]map[string]*store.Doc)
	}
	if s.docs[kind] == nil {
		s.docs[kind] = make(map[string]*store.Doc)
	}
	s.docs[kind][d.Name] = store.CloneDoc(d)
	return nil
}

// DeleteDoc implements store.DocStore.
func (s *Store) DeleteDoc(_ context.Context, kind, name string) error {
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.docs[kind][name]; !ok {
		return fmt.Errorf("memstore: %s %q: %w", kind, name, store.ErrDocNotFound)
	}
	delete(s.docs[kind], name)
	return nil
}
