package memstore

import (
	"context"
	"time"

	"github.com/delayq/delayq/internal/store"
)

var _ store.SeriesStore = (*Store)(nil)

// seriesRing is one topic's buckets at one resolution: Keep/Step slots,
// slot (start/step) mod len. A slot holding an older bucket than the one
// being written is that bucket expired (their starts are a whole Keep or
// more apart), so writing overwrites it: memory is bounded by the topics
// written and expiry costs nothing.
type seriesRing struct {
	step  int64                 // seconds
	slots []*store.SeriesBucket // nil: never written
}

func newSeriesRing(r store.SeriesResolution) *seriesRing {
	return &seriesRing{step: int64(r.Step / time.Second), slots: make([]*store.SeriesBucket, r.Keep/r.Step)}
}

func (g *seriesRing) slot(start int64) int {
	i := (start / g.step) % int64(len(g.slots))
	if i < 0 {
		i += int64(len(g.slots))
	}
	return int(i)
}

// AddSeries implements store.SeriesStore.
func (s *Store) AddSeries(_ context.Context, at time.Time, samples []store.SeriesSample) error {
	for _, smp := range samples {
		if err := smp.Check(); err != nil {
			return err
		}
	}
	if err := s.lock(); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if s.series == nil {
		s.series = make(map[string][]*seriesRing)
	}
	for _, smp := range samples {
		rings := s.series[smp.Topic]
		if rings == nil {
			for _, r := range store.SeriesResolutions {
				rings = append(rings, newSeriesRing(r))
			}
			s.series[smp.Topic] = rings
		}
		for i, r := range store.SeriesResolutions {
			g := rings[i]
			start := store.SeriesBucketStart(at, r.Step)
			k := g.slot(start)
			b := g.slots[k]
			switch {
			case b == nil || b.At.Unix() < start:
				b = &store.SeriesBucket{At: time.Unix(start, 0).UTC()}
				g.slots[k] = b
			case b.At.Unix() > start:
				continue // a sample older than the slot's bucket: expired already
			}
			b.Merge(smp)
		}
	}
	return nil
}

// ReadSeries implements store.SeriesStore.
func (s *Store) ReadSeries(_ context.Context, p store.SeriesReadParams) ([]store.SeriesBucket, error) {
	r, first, last, err := store.SeriesBounds(p)
	if err != nil {
		return nil, err
	}
	if err := s.lock(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	out := []store.SeriesBucket{}
	rings := s.series[p.Topic]
	if rings == nil || first > last {
		return out, nil
	}
	var g *seriesRing
	for i, res := range store.SeriesResolutions {
		if res == r {
			g = rings[i]
		}
	}
	for start := first; start <= last; start += g.step {
		if b := g.slots[g.slot(start)]; b != nil && b.At.Unix() == start {
			out = append(out, b.Clone())
		}
	}
	return out, nil
}
