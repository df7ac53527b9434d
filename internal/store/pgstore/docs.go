package pgstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq/internal/store"
)

// GetDoc implements store.DocStore.
func (s *Store) GetDoc(ctx context.Context, kind, name string) (*store.Doc, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var d store.Doc
	var rev int64
	err := s.pool.QueryRow(ctx, s.q.getDoc, kind, name).Scan(&d.Name, &rev, &d.Data)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("pgstore: %s %q: %w", kind, name, store.ErrDocNotFound)
	}
	if err != nil {
		return nil, s.fail("get doc", err)
	}
	d.Rev = uint64(rev)
	return &d, nil
}

// ListDocs implements store.DocStore.
func (s *Store) ListDocs(ctx context.Context, kind string) ([]*store.Doc, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, s.q.listDocs, kind)
	if err != nil {
		return nil, s.fail("list docs", err)
	}
	defer rows.Close()
	out := []*store.Doc{}
	for rows.Next() {
		var d store.Doc
		var rev int64
		if err := rows.Scan(&d.Name, &rev, &d.Data); err != nil {
			return nil, s.fail("list docs", err)
		}
		d.Rev = uint64(rev)
		out = append(out, &d)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("list docs", err)
	}
	return out, nil
}

// SaveDoc implements store.DocStore: a compare-and-set on rev in one
// statement, so instances racing to fire one schedule tick have one
// winner.
func (s *Store) SaveDoc(ctx context.Context, kind string, d *store.Doc, prev uint64) error {
	return s.tx(ctx, "save doc", func(tx pgx.Tx) error {
		data := d.Data
		if data == nil {
			data = []byte{}
		}
		var err error
		var n int64
		if prev == 0 {
			tag, e := tx.Exec(ctx, s.q.insertDoc, kind, d.Name, int64(d.Rev), data)
			n, err = tag.RowsAffected(), e
		} else {
			tag, e := tx.Exec(ctx, s.q.updateDoc, kind, d.Name, int64(d.Rev), data, int64(prev))
			n, err = tag.RowsAffected(), e
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return fmt.Errorf("pgstore: %s %q: %w", kind, d.Name, store.ErrDocConflict)
		}
		return nil
	})
}

// DeleteDoc implements store.DocStore.
func (s *Store) DeleteDoc(ctx context.Context, kind, name string) error {
	return s.tx(ctx, "delete doc", func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, s.q.deleteDoc, kind, name)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("pgstore: %s %q: %w", kind, name, store.ErrDocNotFound)
		}
		return nil
	})
}
