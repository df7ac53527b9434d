package diskstore

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"

	"github.com/cockroachdb/pebble/v2"

	"github.com/delayq/delayq/internal/store"
)

var _ store.DocStore = (*Store)(nil)

// docMu serialises document compare-and-sets. Documents are written a few
// times per schedule tick or operator call, not per job, so one lock for
// every store in the process costs nothing and keeps the job path's mutex
// out of it.
var docMu sync.Mutex

// docPrefix is the start of every key of kind: P<kind>\x00.
func docPrefix(kind string) []byte {
	k := make([]byte, 0, len(kind)+2)
	k = append(k, prefixDoc)
	k = append(k, kind...)
	return append(k, 0)
}

func docKey(kind, name string) []byte { return append(docPrefix(kind), name...) }

// decodeDoc parses a value: the revision (8 bytes, big-endian), then the
// data.
func decodeDoc(name string, v []byte) (*store.Doc, error) {
	if len(v) < 8 {
		return nil, unavailable("decode document "+name, errCorrupt)
	}
	return &store.Doc{Name: name, Rev: binary.BigEndian.Uint64(v), Data: append([]byte(nil), v[8:]...)}, nil
}

// readDoc reads a document straight from Pebble: the job path's open group
// never holds P keys, so there is nothing of it to commit first.
func (s *Store) readDoc(kind, name string) (*store.Doc, error) {
	v, closer, err := s.db.Get(docKey(kind, name))
	if errors.Is(err, pebble.ErrNotFound) {
		return nil, fmt.Errorf("diskstore: %s %q: %w", kind, name, store.ErrDocNotFound)
	}
	if err != nil {
		return nil, unavailable("get "+kind, err)
	}
	defer closer.Close()
	return decodeDoc(name, v)
}

// GetDoc implements store.DocStore.
func (s *Store) GetDoc(ctx context.Context, kind, name string) (d *store.Doc, err error) {
	err = s.outside(ctx, false, func() error {
		d, err = s.readDoc(kind, name)
		return err
	})
	return d, err
}

// ListDocs implements store.DocStore.
func (s *Store) ListDocs(ctx context.Context, kind string) (out []*store.Doc, err error) {
	out = []*store.Doc{}
	err = s.outside(ctx, false, func() error {
		lo := docPrefix(kind)
		it, err := s.db.NewIter(&pebble.IterOptions{LowerBound: lo, UpperBound: prefixEnd(lo)})
		if err != nil {
			return unavailable("list "+kind, err)
		}
		defer it.Close()
		for it.First(); it.Valid(); it.Next() {
			d, err := decodeDoc(string(it.Key()[len(lo):]), it.Value())
			if err != nil {
				return err
			}
			out = append(out, d)
		}
		if err := it.Error(); err != nil {
			return unavailable("list "+kind, err)
		}
		return nil
	})
	return out, err
}

// SaveDoc implements store.DocStore: a read and a durable write
// (commitDurable, durable.go) under docMu.
func (s *Store) SaveDoc(ctx context.Context, kind string, d *store.Doc, prev uint64) error {
	v := binary.BigEndian.AppendUint64(make([]byte, 0, 8+len(d.Data)), d.Rev)
	v = append(v, d.Data...)
	return s.outside(ctx, true, func() error {
		docMu.Lock()
		defer docMu.Unlock()
		var cur uint64
		old, err := s.readDoc(kind, d.Name)
		switch {
		case err == nil:
			cur = old.Rev
		case !errors.Is(err, store.ErrDocNotFound):
			return err
		}
		if cur != prev {
			return fmt.Errorf("diskstore: %s %q: %w", kind, d.Name, store.ErrDocConflict)
		}
		if err := s.setDurable(docKey(kind, d.Name), v); err != nil {
			return unavailable("save "+kind, err)
		}
		return nil
	})
}

// DeleteDoc implements store.DocStore: a durable delete under docMu.
func (s *Store) DeleteDoc(ctx context.Context, kind, name string) error {
	return s.outside(ctx, true, func() error {
		docMu.Lock()
		defer docMu.Unlock()
		if _, err := s.readDoc(kind, name); err != nil {
			return err
		}
		if err := s.deleteDurable(docKey(kind, name)); err != nil {
			return unavailable("delete "+kind, err)
		}
		return nil
	})
}
