package pgstore

import (
	"context"
	"encoding/json"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/delayq/delayq/internal/store"
)

// AddSeries implements store.SeriesStore: each bucket is a row merged
// under its row lock (store.SeriesBucket.Merge), so instances writing
// into one bucket add up. Expired buckets are deleted through their
// expiry index, a bounded batch per call.
func (s *Store) AddSeries(ctx context.Context, at time.Time, samples []store.SeriesSample) error {
	for _, sm := range samples {
		if err := sm.Check(); err != nil {
			return err
		}
	}
	return s.tx(ctx, "add series", func(tx pgx.Tx) error {
		for _, sm := range samples {
			for _, r := range store.SeriesResolutions {
				step := int64(r.Step / time.Second)
				start := store.SeriesBucketStart(at, r.Step)
				expires := start + int64(r.Keep/time.Second)
				if _, err := tx.Exec(ctx, s.q.seriesInit, sm.Topic, step, start, expires); err != nil {
					return err
				}
				b, err := scanBucket(tx.QueryRow(ctx, s.q.seriesLock, sm.Topic, step, start), false)
				if err != nil {
					return err
				}
				b.Merge(sm)
				_, err = tx.Exec(ctx, s.q.seriesSave, sm.Topic, step, start, b.Ready, b.Delayed, b.Reserved, b.Buried,
					b.Fires, b.Finishes, b.Failures, latenessJSON(b.Lateness), b.LatenessMax.Milliseconds())
				if err != nil {
					return err
				}
			}
		}
		_, err := tx.Exec(ctx, s.q.seriesExpire, at.Unix())
		return err
	})
}

func latenessJSON(m map[int]int) []byte {
	if len(m) == 0 {
		return nil
	}
	sm := make(map[string]int, len(m))
	for i, n := range m {
		sm[strconv.Itoa(i)] = n
	}
	b, _ := json.Marshal(sm)
	return b
}

// scanBucket reads a series row (with its start first when withStart).
func scanBucket(row pgx.Row, withStart bool) (store.SeriesBucket, error) {
	var b store.SeriesBucket
	var start, maxMS int64
	var lat []byte
	dest := []any{&b.Ready, &b.Delayed, &b.Reserved, &b.Buried, &b.Fires, &b.Finishes, &b.Failures, &lat, &maxMS}
	if withStart {
		dest = append([]any{&start}, dest...)
	}
	if err := row.Scan(dest...); err != nil {
		return b, err
	}
	b.At = time.Unix(start, 0).UTC()
	b.LatenessMax = time.Duration(maxMS) * time.Millisecond
	if len(lat) > 0 {
		var sm map[string]int
		if err := json.Unmarshal(lat, &sm); err != nil {
			return b, err
		}
		b.Lateness = make(map[int]int, len(sm))
		for k, n := range sm {
			i, err := strconv.Atoi(k)
			if err != nil {
				return b, err
			}
			b.Lateness[i] = n
		}
	}
	return b, nil
}

// ReadSeries implements store.SeriesStore.
func (s *Store) ReadSeries(ctx context.Context, p store.SeriesReadParams) ([]store.SeriesBucket, error) {
	r, first, last, err := store.SeriesBounds(p)
	if err != nil {
		return nil, err
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	out := []store.SeriesBucket{}
	if first > last {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, s.q.seriesRead, p.Topic, int64(r.Step/time.Second), first, last)
	if err != nil {
		return nil, s.fail("read series", err)
	}
	defer rows.Close()
	for rows.Next() {
		b, err := scanBucket(rows, true)
		if err != nil {
			return nil, s.fail("read series", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, s.fail("read series", err)
	}
	return out, nil
}
