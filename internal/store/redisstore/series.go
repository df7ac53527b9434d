package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq/internal/store"
)

var _ store.SeriesStore = (*Store)(nil)

// addSeriesScript merges one topic's sample into its buckets, one per
// resolution (KEYS, all of the topic's hash tag): gauges set, counters
// and lateness buckets added with HINCRBY, the maximum kept, and each key
// set to expire when its bucket does (PEXPIREAT start+Keep), so nothing
// ever scans for old buckets. ARGV: one expiry (unix ms) per key, then
// ready, delayed, reserved, buried, fires, finishes, failures, lateness
// max (ns), then (lateness bucket, count) pairs. Several instances
// writing the same bucket add up, in any order.
var addSeriesScript = rueidis.NewLuaScript(`
local n = #KEYS
for i = 1, n do
  local k = KEYS[i]
  redis.call('HSET', k, 'r', ARGV[n+1], 'd', ARGV[n+2], 'v', ARGV[n+3], 'b', ARGV[n+4])
  if ARGV[n+5] ~= '0' then redis.call('HINCRBY', k, 'f', ARGV[n+5]) end
  if ARGV[n+6] ~= '0' then redis.call('HINCRBY', k, 'n', ARGV[n+6]) end
  if ARGV[n+7] ~= '0' then redis.call('HINCRBY', k, 'x', ARGV[n+7]) end
  local m = tonumber(ARGV[n+8])
  if m > 0 and m > tonumber(redis.call('HGET', k, 'm') or '0') then redis.call('HSET', k, 'm', ARGV[n+8]) end
  for j = n+9, #ARGV, 2 do redis.call('HINCRBY', k, 'l' .. ARGV[j], ARGV[j+1]) end
  redis.call('PEXPIREAT', k, ARGV[i])
end
return 0
`)

// AddSeries implements store.SeriesStore: one script per topic, all in
// one pipeline.
func (s *Store) AddSeries(ctx context.Context, at time.Time, samples []store.SeriesSample) error {
	for _, smp := range samples {
		if err := smp.Check(); err != nil {
			return err
		}
	}
	if err := s.check(); err != nil {
		return err
	}
	if len(samples) == 0 {
		return nil
	}
	execs := make([]rueidis.LuaExec, 0, len(samples))
	for _, smp := range samples {
		keys := make([]string, 0, len(store.SeriesResolutions))
		args := make([]string, 0, len(store.SeriesResolutions)+8+2*len(smp.Lateness))
		for _, r := range store.SeriesResolutions {
			start := store.SeriesBucketStart(at, r.Step)
			keys = append(keys, s.k.series(smp.Topic, r.Step, start))
			args = append(args, strconv.FormatInt(time.Unix(start, 0).Add(r.Keep).UnixMilli(), 10))
		}
		for _, v := range []int{smp.Ready, smp.Delayed, smp.Reserved, smp.Buried, smp.Fires, smp.Finishes, smp.Failures, int(smp.LatenessMax)} {
			args = append(args, strconv.Itoa(v))
		}
		for i, c := range smp.Lateness {
			if c > 0 {
				args = append(args, strconv.Itoa(i), strconv.Itoa(c))
			}
		}
		execs = append(execs, rueidis.LuaExec{Keys: keys, Args: args})
	}
	for _, r := range addSeriesScript.ExecMulti(ctx, s.c, execs...) {
		if err := r.Error(); err != nil {
			return unavailable("add series", err)
		}
	}
	return nil
}

// ReadSeries implements store.SeriesStore: HGETALL of every bucket key in
// the range, in one pipeline (at most Keep/Step of them).
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
	step := int64(r.Step / time.Second)
	cmds := make(rueidis.Commands, 0, (last-first)/step+1)
	for start := first; start <= last; start += step {
		cmds = append(cmds, s.c.B().Hgetall().Key(s.k.series(p.Topic, r.Step, start)).Build())
	}
	for i, res := range s.c.DoMulti(ctx, cmds...) {
		m, err := res.AsStrMap()
		if err != nil {
			return nil, unavailable("read series", err)
		}
		if len(m) == 0 {
			continue
		}
		b, err := decodeSeries(first+int64(i)*step, m)
		if err != nil {
			return nil, fmt.Errorf("redisstore: series of %q: %w", p.Topic, err)
		}
		out = append(out, b)
	}
	return out, nil
}

// decodeSeries reads a bucket's hash: r d v b gauges, f n x counters, m
// the maximum lateness, l<i> lateness bucket i.
func decodeSeries(start int64, m map[string]string) (store.SeriesBucket, error) {
	b := store.SeriesBucket{At: time.Unix(start, 0).UTC()}
	for f, v := range m {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return b, fmt.Errorf("field %s: bad value %q", f, v)
		}
		switch f {
		case "r":
			b.Ready = int(n)
		case "d":
			b.Delayed = int(n)
		case "v":
			b.Reserved = int(n)
		case "b":
			b.Buried = int(n)
		case "f":
			b.Fires = int(n)
		case "n":
			b.Finishes = int(n)
		case "x":
			b.Failures = int(n)
		case "m":
			b.LatenessMax = time.Duration(n)
		default:
			i, err := strconv.Atoi(strings.TrimPrefix(f, "l"))
			if !strings.HasPrefix(f, "l") || err != nil || i < 0 || i >= store.SeriesLatenessBuckets {
				return b, fmt.Errorf("unknown field %q", f)
			}
			if b.Lateness == nil {
				b.Lateness = make(map[int]int)
			}
			b.Lateness[i] = int(n)
		}
	}
	return b, nil
}
