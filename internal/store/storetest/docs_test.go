package storetest_test

import (
	"context"

	"github.com/delayq/delayq/internal/store"
)

// The durable wrapper keeps documents in its memstore too, so the suite's
// document and schedule tests (Durable included) run against it.

func (d *durable) GetDoc(ctx context.Context, kind, name string) (*store.Doc, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.GetDoc(ctx, kind, name)
}

func (d *durable) ListDocs(ctx context.Context, kind string) ([]*store.Doc, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.ListDocs(ctx, kind)
}

func (d *durable) SaveDoc(ctx context.Context, kind string, doc *store.Doc, prev uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.SaveDoc(ctx, kind, doc, prev)
}

func (d *durable) DeleteDoc(ctx context.Context, kind, name string) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.DeleteDoc(ctx, kind, name)
}
