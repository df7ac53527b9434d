package diskstore

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cockroachdb/pebble/v2"
	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Get implements store.Store: a live job, or a retained one within its
// retention.
func (s *Store) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	var out *delayq.Job
	err := s.read(ctx, func() error {
		j, err := s.lookupAny(ref)
		if err == nil && j.State.Retained() && !s.visible(j) {
			err = fmt.Errorf("diskstore: job %s: %w", ref, delayq.ErrNotFound)
		}
		if err == nil {
			out = j.Clone()
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Topics implements store.Store. Counters live in memory, so it scans
// nothing.
func (s *Store) Topics(ctx context.Context) ([]delayq.TopicStats, error) {
	out := []delayq.TopicStats{}
	err := s.read(ctx, func() error {
		for name, tp := range s.topics {
			if tp.empty() {
				continue
			}
			st := delayq.TopicStats{
				Name: name, Delayed: tp.delayed, Ready: tp.ready, Reserved: tp.reserved,
				Buried: tp.buried, Urgent: tp.urgent, PausedUntil: tp.paused,
			}
			if e := tp.byDue.top(); e != nil {
				st.OldestReady = time.UnixMilli(e.due)
			}
			out = append(out, st)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b delayq.TopicStats) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// List implements store.Store. It is a prefix scan of the topic's state
// indexes (X keys), which are in serving order. The cursor is the state
// byte and sort key of the last job returned, base64url-encoded.
func (s *Store) List(ctx context.Context, p store.ListParams) (*store.ListResult, error) {
	after, err := parseCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	res := &store.ListResult{Jobs: []*delayq.Job{}}
	states := listOrder
	if p.State.Retained() {
		states = []byte{stateByte(p.State)}
	}
	err = s.read(ctx, func() error {
		for _, st := range states {
			if p.State != "" && stateByte(p.State) != st {
				continue
			}
			if after != nil && rank(st) < rank(after[0]) {
				continue
			}
			if done, err := s.listState(p, st, after, res); done || err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// rank is a state's place in cursorOrder.
func rank(st byte) int { return bytes.IndexByte(cursorOrder, st) }

// listState appends the jobs of one state to res, after the cursor. It
// reports done when the page is full. Requires mu.
func (s *Store) listState(p store.ListParams, st byte, after []byte, res *store.ListResult) (bool, error) {
	prefix := stateIndexPrefix(p.Topic, st)
	lower := prefix
	if after != nil && after[0] == st {
		lower = append(append(bytes.Clone(prefix), after[1:]...), 0)
	}
	if r := stateOf(st); r.Retained() {
		// Expired jobs Tick has not removed yet are the oldest: start
		// past them (those that ended at or before now - For).
		past := s.opts.Retention.Clock()().Add(-s.opts.Retention.For).UnixMilli() + 1
		if from := binary.BigEndian.AppendUint64(bytes.Clone(prefix), sortable(past)); bytes.Compare(from, lower) > 0 {
			lower = from
		}
	}
	it, err := s.iter(&pebble.IterOptions{LowerBound: lower, UpperBound: prefixEnd(prefix)})
	if err != nil {
		return false, unavailable("list", err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		if p.Limit > 0 && len(res.Jobs) == p.Limit {
			last := res.Jobs[len(res.Jobs)-1]
			res.Next = base64.RawURLEncoding.EncodeToString(append([]byte{stateByte(last.State)}, sortKey(last)...))
			return true, nil
		}
		_, id, ov, err := splitIndexValue(it.Value())
		if err != nil {
			continue
		}
		j, found, err := s.record(string(id))
		if err != nil {
			return false, err
		}
		if found && ov != nil {
			if j, err = applyOverlay(j, ov); err != nil {
				return false, unavailable("list", err)
			}
		}
		if found && st == stReady {
			promoted(j)
		}
		if found && j.State.Retained() && !s.visible(j) {
			continue // the clock moved on since the seek
		}
		if found {
			res.Jobs = append(res.Jobs, j)
		}
	}
	return false, it.Error()
}

// parseCursor decodes a List cursor; nil for "".
func parseCursor(c string) ([]byte, error) {
	if c == "" {
		return nil, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err != nil || len(b) < 2 || rank(b[0]) < 0 {
		return nil, delayq.Invalid(delayq.CodeBadCursor, "cursor", "%q is not a cursor", c)
	}
	return b, nil
}
