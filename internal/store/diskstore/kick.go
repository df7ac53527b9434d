package diskstore

import (
	"context"

	"github.com/cockroachdb/pebble/v2"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Kick implements store.Store. It walks the topic's buried or delayed
// index (p.State; for "" buried when the topic has any) on disk: kicks
// are operator commands, rare enough that keeping buried jobs in memory
// would not pay.
func (s *Store) Kick(ctx context.Context, p store.KickParams) (int, error) {
	n := 0
	err := s.write(ctx, "kick", func(t *txn) error {
		var st byte
		switch p.State {
		case delayq.StateBuried:
			st = stBuried
		case delayq.StateDelayed:
			st = stDelayed
		case "":
			st = stDelayed
			if tp := s.topics[p.Topic]; tp != nil && tp.buried > 0 {
				st = stBuried
			}
		default:
			return nil
		}
		ids, err := s.scanIDs(stateIndexPrefix(p.Topic, st), p.Max)
		if err != nil {
			return err
		}
		now := s.clock.At(p.Now)
		for _, id := range ids {
			j, ok, err := s.record(id)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			k := successor(j)
			store.ApplyKick(k, now)
			t.stage(j, k)
		}
		n = len(t.changes)
		return nil
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// scanIDs returns the ids of the first max X entries under prefix.
// Requires mu.
func (s *Store) scanIDs(prefix []byte, max int) ([]string, error) {
	if max <= 0 {
		return nil, nil
	}
	it, err := s.iter(&pebble.IterOptions{LowerBound: prefix, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return nil, unavailable("scan index", err)
	}
	var ids []string
	for ok := it.First(); ok && len(ids) < max; ok = it.Next() {
		if v := it.Value(); len(v) >= 8 {
			ids = append(ids, string(v[8:]))
		}
	}
	if err := it.Close(); err != nil {
		return nil, unavailable("scan index", err)
	}
	return ids, nil
}
