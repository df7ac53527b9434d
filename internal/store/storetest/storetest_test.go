package storetest_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/store/memstore"
	"github.com/delayq/delayq/internal/store/storetest"
)

// TestSuiteOnDurableMemstore runs the suite against a memstore dressed as a
// durable store whose seqs do not start where the model's do, so the parts
// skipped for memstore itself (persistence, the randomised comparison with
// its seq translation) are exercised too.
func TestSuiteOnDurableMemstore(t *testing.T) {
	storetest.Run(t, storetest.Factory{
		Open: func(t *testing.T) store.Store {
			m := memstore.New()
			burnSeqs(t, m, 7)
			return &durable{mem: m}
		},
		OpenRetaining: func(t *testing.T, r store.Retention) store.Store {
			m := memstore.Open(memstore.Options{Retention: r})
			burnSeqs(t, m, 7)
			return &durable{mem: m}
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			if err := s.Close(); err != nil {
				t.Fatalf("Close() = %v", err)
			}
			return &durable{mem: s.(*durable).mem}
		},
	})
}

// burnSeqs puts and deletes n jobs, so the next seq is n+1. A retaining
// store keeps them, ended in year 1, until a Tick far before the suite's
// times removes them.
func burnSeqs(t *testing.T, m *memstore.Store, n int) {
	for i := range n {
		ref := delayq.Ref{ID: fmt.Sprintf("burn%d", i)}
		if err := m.Put(t.Context(), []*delayq.Job{{ID: ref.ID, Topic: "burn", State: delayq.StateReady}}); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Delete(t.Context(), store.DeleteParams{Ref: ref}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := m.Tick(t.Context(), store.TickParams{Now: time.Time{}.Add(1000 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

// durable is a handle on a memstore that outlives Close, as a disk
// directory outlives the process that had it open.
type durable struct {
	mem    *memstore.Store
	closed atomic.Bool
}

var errClosed = errors.New("durable: closed")

func (d *durable) check() error {
	if d.closed.Load() {
		return errClosed
	}
	return nil
}

func (d *durable) Close() error {
	d.closed.Store(true)
	return nil
}

func (d *durable) Put(ctx context.Context, jobs []*delayq.Job) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.Put(ctx, jobs)
}

func (d *durable) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Reserve(ctx, p)
}

func (d *durable) Release(ctx context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Release(ctx, p)
}

func (d *durable) GiveBack(ctx context.Context, p store.GiveBackParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.GiveBack(ctx, p)
}

func (d *durable) Touch(ctx context.Context, p store.TouchParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Touch(ctx, p)
}

func (d *durable) Bury(ctx context.Context, p store.BuryParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Bury(ctx, p)
}

func (d *durable) Kick(ctx context.Context, p store.KickParams) (int, error) {
	if err := d.check(); err != nil {
		return 0, err
	}
	return d.mem.Kick(ctx, p)
}

func (d *durable) KickJob(ctx context.Context, p store.KickJobParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.KickJob(ctx, p)
}

func (d *durable) Delete(ctx context.Context, p store.DeleteParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Delete(ctx, p)
}

func (d *durable) DeleteBatch(ctx context.Context, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	if err := d.check(); err != nil {
		return nil, nil, err
	}
	return d.mem.DeleteBatch(ctx, ps)
}

func (d *durable) Update(ctx context.Context, p store.UpdateParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Update(ctx, p)
}

func (d *durable) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Get(ctx, ref)
}

func (d *durable) List(ctx context.Context, p store.ListParams) (*store.ListResult, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.List(ctx, p)
}

func (d *durable) Topics(ctx context.Context) ([]delayq.TopicStats, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Topics(ctx)
}

func (d *durable) Pause(ctx context.Context, p store.PauseParams) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.Pause(ctx, p)
}

func (d *durable) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.Tick(ctx, p)
}

func (d *durable) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.ReserveJob(ctx, p)
}

func (d *durable) DueCounts(ctx context.Context, topic string, now time.Time, bounds []time.Duration) ([]int, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.DueCounts(ctx, topic, now, bounds)
}

func (d *durable) AddSeries(ctx context.Context, at time.Time, samples []store.SeriesSample) error {
	if err := d.check(); err != nil {
		return err
	}
	return d.mem.AddSeries(ctx, at, samples)
}

func (d *durable) ReadSeries(ctx context.Context, p store.SeriesReadParams) ([]store.SeriesBucket, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	return d.mem.ReadSeries(ctx, p)
}
