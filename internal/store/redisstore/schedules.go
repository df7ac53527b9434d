package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq/internal/store"
)

var _ store.ScheduleStore = (*Store)(nil)

// saveSchedScript is SaveSchedule's compare-and-set: KEYS[1] the
// schedule's hash, KEYS[2] the name set; ARGV: prev rev ("0" = must not
// exist), new rev, JSON record, name. It answers 1 when it wrote.
var saveSchedScript = rueidis.NewLuaScript(`
local cur = redis.call('HGET', KEYS[1], 'rev') or '0'
if cur ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'rev', ARGV[2], 'data', ARGV[3])
redis.call('SADD', KEYS[2], ARGV[4])
return 1
`)

// deleteSchedScript removes a schedule and its name; 0 when there was none.
var deleteSchedScript = rueidis.NewLuaScript(`
redis.call('SREM', KEYS[2], ARGV[1])
return redis.call('DEL', KEYS[1])
`)

func (s *Store) decodeSched(name, data string) (*store.Schedule, error) {
	var sc store.Schedule
	if err := json.Unmarshal([]byte(data), &sc); err != nil {
		return nil, fmt.Errorf("redisstore: decode schedule %q: %w", name, err)
	}
	return &sc, nil
}

// GetSchedule implements store.ScheduleStore.
func (s *Store) GetSchedule(ctx context.Context, name string) (*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	data, err := s.c.Do(ctx, s.c.B().Hget().Key(s.k.sched(name)).Field("data").Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return nil, fmt.Errorf("redisstore: %q: %w", name, store.ErrScheduleNotFound)
	}
	if err != nil {
		return nil, unavailable("get schedule", err)
	}
	return s.decodeSched(name, data)
}

// ListSchedules implements store.ScheduleStore: the name set, then every
// record in one pipeline. A name whose record is gone (deleted between
// the two reads) is left out.
func (s *Store) ListSchedules(ctx context.Context) ([]*store.Schedule, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	names, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.k.schedNames()).Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("list schedules", err)
	}
	sort.Strings(names)
	out := make([]*store.Schedule, 0, len(names))
	if len(names) == 0 {
		return out, nil
	}
	cmds := make(rueidis.Commands, 0, len(names))
	for _, n := range names {
		cmds = append(cmds, s.c.B().Hget().Key(s.k.sched(n)).Field("data").Build())
	}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		data, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return nil, unavailable("list schedules", err)
		}
		sc, err := s.decodeSched(names[i], data)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// SaveSchedule implements store.ScheduleStore with one script.
func (s *Store) SaveSchedule(ctx context.Context, sc *store.Schedule, prev uint64) error {
	if err := s.check(); err != nil {
		return err
	}
	b, err := json.Marshal(sc)
	if err != nil {
		return fmt.Errorf("redisstore: encode schedule: %w", err)
	}
	n, err := saveSchedScript.Exec(ctx, s.c, []string{s.k.sched(sc.Name), s.k.schedNames()},
		[]string{strconv.FormatUint(prev, 10), strconv.FormatUint(sc.Rev, 10), string(b), sc.Name}).AsInt64()
	if err != nil {
		return unavailable("save schedule", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: %q: %w", sc.Name, store.ErrScheduleConflict)
	}
	return nil
}

// DeleteSchedule implements store.ScheduleStore.
func (s *Store) DeleteSchedule(ctx context.Context, name string) error {
	if err := s.check(); err != nil {
		return err
	}
	n, err := deleteSchedScript.Exec(ctx, s.c, []string{s.k.sched(name), s.k.schedNames()}, []string{name}).AsInt64()
	if err != nil {
		return unavailable("delete schedule", err)
	}
	if n == 0 {
		return fmt.Errorf("redisstore: %q: %w", name, store.ErrScheduleNotFound)
	}
	return nil
}
