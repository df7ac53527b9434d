package storetest_test

import (
	"context"

	"github.com/delayq/delayq/internal/store"
)

// The durable wrapper keeps schedules in its memstore too, so the suite's
// schedule tests (Durable included) run against it.

func (d *durable) GetSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.GetSchedule(ctx, name)
}

func (d *durable) ListSchedules(ctx context.Context) ([]*store.Schedule, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.ListSchedules(ctx)
}

func (d *durable) SaveSchedule(ctx context.Context, s *store.Schedule, prev uint64) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.SaveSchedule(ctx, s, prev)
}

func (d *durable) DeleteSchedule(ctx context.Context, name string) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.DeleteSchedule(ctx, name)
}
