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

// seriesGroup is how many consecutive buckets of one resolution share a
// Redis hash (a minute of 10-second buckets, six minutes of one-minute
// ones). Redis's cost is mostly per key, so a hash of six buckets, kept
// in Redis's compact listpack encoding (a few dozen small fields), costs
// about 43 B a quiet bucket and 100 B a busy one instead of 173 B and
// 231 B as a hash of its own (measured with INFO memory;
// docs/operations.md).
const seriesGroup = 6

// seriesGroupStart is the start (Unix seconds) of the group holding the
// bucket starting at start, and the bucket's index in it.
func seriesGroupStart(r store.SeriesResolution, start int64) (group int64, index int) {
	span := seriesGroup * int64(r.Step/time.Second)
	group = start / span * span
	if start%span < 0 {
		group -= span
	}
	return group, int((start - group) / int64(r.Step/time.Second))
}

// addSeriesScript merges one topic's sample into its buckets, one per
// resolution, each a field group <i><f> of its group's hash (KEYS, all of
// the topic's hash tag): the gauges set as one field <i>g
// ("ready,delayed,reserved,buried"), counters and lateness buckets added
// with HINCRBY (<i>f fires, <i>n finishes, <i>x failures, <i>l<k>
// lateness bucket k), the maximum <i>m kept, and each key set to expire
// when its last bucket does (PEXPIREAT), so nothing ever scans for old
// buckets. ARGV: per key its expiry (unix ms) and the bucket's index,
// then the gauges, fires, finishes, failures, lateness max (ns), then
// (lateness bucket, count) pairs. Several instances writing the same
// bucket add up, in any order.
var addSeriesScript = rueidis.NewLuaScript(`
local n = #KEYS
local a = 2*n
for i = 1, n do
  local k, p = KEYS[i], ARGV[2*i]
  redis.call('HSET', k, p .. 'g', ARGV[a+1])
  if ARGV[a+2] ~= '0' then redis.call('HINCRBY', k, p .. 'f', ARGV[a+2]) end
  if ARGV[a+3] ~= '0' then redis.call('HINCRBY', k, p .. 'n', ARGV[a+3]) end
  if ARGV[a+4] ~= '0' then redis.call('HINCRBY', k, p .. 'x', ARGV[a+4]) end
  local m = tonumber(ARGV[a+5])
  if m > 0 and m > tonumber(redis.call('HGET', k, p .. 'm') or '0') then redis.call('HSET', k, p .. 'm', ARGV[a+5]) end
  for j = a+6, #ARGV, 2 do redis.call('HINCRBY', k, p .. 'l' .. ARGV[j], ARGV[j+1]) end
  redis.call('PEXPIREAT', k, ARGV[2*i-1])
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
		args := make([]string, 0, 2*len(store.SeriesResolutions)+5+2*len(smp.Lateness))
		for _, r := range store.SeriesResolutions {
			start := store.SeriesBucketStart(at, r.Step)
			group, index := seriesGroupStart(r, start)
			last := time.Unix(group, 0).Add((seriesGroup - 1) * r.Step) // the group's last bucket
			keys = append(keys, s.k.series(smp.Topic, r.Step, group))
			args = append(args, strconv.FormatInt(last.Add(r.Keep).UnixMilli(), 10), strconv.Itoa(index))
		}
		args = append(args, fmt.Sprintf("%d,%d,%d,%d", smp.Ready, smp.Delayed, smp.Reserved, smp.Buried))
		for _, v := range []int{smp.Fires, smp.Finishes, smp.Failures, int(smp.LatenessMax)} {
			args = append(args, strconv.Itoa(v))
		}
		for i, c := range smp.Lateness {
			if c > 0 {
				args = append(args, strconv.Itoa(i), strconv.Itoa(c))
			}
		}
		execs = append(execs, rueidis.LuaExec{Keys: keys, Args: args})
	}
	for _, r := range execMulti(ctx, s.c, addSeriesScript, execs) {
		if err := r.Error(); err != nil {
			return unavailable("add series", err)
		}
	}
	return nil
}

// ReadSeries implements store.SeriesStore: HGETALL of every group hash
// the range touches, in one pipeline (at most Keep/Step/6 + 1 of them).
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
	g0, _ := seriesGroupStart(r, first)
	g1, _ := seriesGroupStart(r, last)
	cmds := make(rueidis.Commands, 0, (g1-g0)/(seriesGroup*step)+1)
	for g := g0; g <= g1; g += seriesGroup * step {
		cmds = append(cmds, s.c.B().Hgetall().Key(s.k.series(p.Topic, r.Step, g)).Build())
	}
	for i, res := range s.c.DoMulti(ctx, cmds...) {
		m, err := res.AsStrMap()
		if err != nil {
			return nil, unavailable("read series", err)
		}
		group := g0 + int64(i)*seriesGroup*step
		buckets, err := decodeSeriesGroup(group, step, m)
		if err != nil {
			return nil, fmt.Errorf("redisstore: series of %q: %w", p.Topic, err)
		}
		for _, b := range buckets {
			if t := b.At.Unix(); t >= first && t <= last {
				out = append(out, b)
			}
		}
	}
	return out, nil
}

// decodeSeriesGroup reads a group's hash (fields <i><f>, addSeriesScript)
// into its buckets, in order; buckets without a field are left out.
func decodeSeriesGroup(group, step int64, m map[string]string) ([]store.SeriesBucket, error) {
	var bs [seriesGroup]*store.SeriesBucket
	for f, v := range m {
		if len(f) < 2 || f[0] < '0' || f[0] >= '0'+seriesGroup {
			return nil, fmt.Errorf("unknown field %q", f)
		}
		i := int(f[0] - '0')
		b := bs[i]
		if b == nil {
			b = &store.SeriesBucket{At: time.Unix(group+int64(i)*step, 0).UTC()}
			bs[i] = b
		}
		if f[1] == 'g' {
			var g [4]int
			parts := strings.Split(v, ",")
			if len(parts) != 4 {
				return nil, fmt.Errorf("field %s: bad gauges %q", f, v)
			}
			for j, part := range parts {
				n, err := strconv.Atoi(part)
				if err != nil || n < 0 {
					return nil, fmt.Errorf("field %s: bad gauges %q", f, v)
				}
				g[j] = n
			}
			b.Ready, b.Delayed, b.Reserved, b.Buried = g[0], g[1], g[2], g[3]
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("field %s: bad value %q", f, v)
		}
		switch f[1:] {
		case "f":
			b.Fires = int(n)
		case "n":
			b.Finishes = int(n)
		case "x":
			b.Failures = int(n)
		case "m":
			b.LatenessMax = time.Duration(n)
		default:
			k, err := strconv.Atoi(f[2:])
			if f[1] != 'l' || err != nil || k < 0 || k >= store.SeriesLatenessBuckets {
				return nil, fmt.Errorf("unknown field %q", f)
			}
			if b.Lateness == nil {
				b.Lateness = make(map[int]int)
			}
			b.Lateness[k] = int(n)
		}
	}
	out := make([]store.SeriesBucket, 0, seriesGroup)
	for _, b := range bs {
		if b != nil {
			out = append(out, *b)
		}
	}
	return out, nil
}
