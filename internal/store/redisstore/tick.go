package redisstore

import (
	"context"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// defaultTickMax is how many jobs Tick moves when TickParams.Max <= 0.
const defaultTickMax = 1000

// maxDueTopics bounds how many due topics one Tick reads per bucket.
const maxDueTopics = 1000

// A timer bucket's due index (P:{b<n>}:due) holds, per topic of the
// bucket with pending work, a time at or before the topic's earliest
// delayed due or reserved deadline. Writers lower it (ZADD LT) before or
// right after their script; Tick raises it only by "set, then re-read the
// topic and lower again", so a put racing with Tick can never leave it
// late. Tick therefore touches only topics with due work: no KEYS, no
// SCAN, nothing that grows with the number of pending jobs.

// tickPeekScript lists a topic's due work without moving it.
//
//	KEYS[1..13] -> the topic's keys
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most entries
//	Returns:   {at, member, at, member, ...} of due delayed and reserved jobs (unsorted)
var tickPeekScript = newReadScript(`
local out = {}
for _, key in ipairs({K_DELAYED, K_RESERVED}) do
  local page = redis.call('ZRANGE', key, '-inf', ARGV[1], 'BYSCORE', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]))
  for i = 1, #page, 2 do out[#out + 1] = page[i + 1]; out[#out + 1] = page[i] end
end
return out
`)

// tickScript makes a topic's due work ready, in (time, seq) order.
//
//	KEYS[1..13] -> the topic's keys
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most jobs to move
//	ARGV[3]    -> time of the last entry that may move ("" = no bound)
//	ARGV[4]    -> member of the last entry that may move
//	ARGV[5..8] -> the topic's backoff: initial ms, max ms, factor, jitter ("" = none)
//	Returns:   {earliest pending or "", now acted at, seq, at, kind, ...}; kind 0 delayed -> ready,
//	           1 TTR ran out -> ready, 2 TTR ran out -> buried (attempts spent),
//	           3 TTR ran out -> delayed by the backoff
var tickScript = newScript(backoffLua + `
local now, max, cutAt, cutM = clock(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local d = redis.call('ZRANGE', K_DELAYED, '-inf', fmt(now), 'BYSCORE', 'WITHSCORES', 'LIMIT', 0, max)
local r = redis.call('ZRANGE', K_RESERVED, '-inf', fmt(now), 'BYSCORE', 'WITHSCORES', 'LIMIT', 0, max)
local out = {'', fmt(now)}
local i, k, n = 1, 1, 0
local function before(a, am, b, bm)
  local x, y = tonumber(a), tonumber(b)
  return x < y or (x == y and am < bm)
end
while n < max do
  local m, at, delayed
  if i <= #d and (k > #r or before(d[i + 1], d[i], r[k + 1], r[k])) then
    m, at, delayed = d[i], d[i + 1], true; i = i + 2
  elseif k <= #r then
    m, at, delayed = r[k], r[k + 1], false; k = k + 2
  else break end
  if cutAt ~= '' and before(cutAt, cutM, at, m) then break end
  local seq = unpad(m)
  local j = load(seq)
  unplace(seq, j)
  local kind = 0
  if delayed then j.state = 'ready'
  else
    local dl = j.deadline
    clear(j)
    failed(j, 'ttr expired', dl)
    if spent(j) then
      hend(j, dl, 'buried', 'ttr expired')
      bury(j, dl); kind = 2
    else
      incr(j, 'tmo') -- each attempt counts once: an expiry that buries is a bury
      hend(j, dl, 'ttr_expired', 'ttr expired')
      j.state = 'ready'; j.due = dl; kind = 1
    end
    if kind == 1 then
      local bo = backoff(j.id, tonumber(j.att))
      if bo > 0 then j.state = 'delayed'; j.due = fmt(tonumber(dl) + bo); kind = 3 end
    end
  end
  place(seq, j)
  save(seq, j)
  out[#out + 1] = seq; out[#out + 1] = at; out[#out + 1] = kind
  n = n + 1
end
out[1] = earliest()
return out
`)

// earliestScript reads a topic's earliest pending time.
//
//	KEYS[1..13] -> the topic's keys
//	Returns:   the earliest delayed due or reserved deadline (unix ms), or ""
var earliestScript = newReadScript(`return earliest()`)

// moved is one job a Tick moved.
type moved struct {
	topic string
	seq   uint64
	at    int64
	kind  int64
	now   int64 // when the topic's script acted (Now never goes back)
}

// Tick implements store.Store for the buckets this instance leases; the
// other buckets are the other instances' work. Several instances briefly
// ticking one bucket is safe: each script moves only what is still due.
func (s *Store) Tick(ctx context.Context, p store.TickParams) (*store.TickResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := ms(p.Now)
	max := p.Max
	if max <= 0 {
		max = defaultTickMax
	}
	buckets := s.leases.held()
	due, err := s.dueTopics(ctx, buckets, now)
	if err != nil {
		return nil, err
	}
	var all []moved
	if len(due) > 0 {
		if all, err = s.tickTopics(ctx, due, now, max, p.Backoff); err != nil {
			return nil, err
		}
	}
	res := result(all)
	next, err := s.next(ctx, buckets, now)
	if err != nil {
		return nil, err
	}
	res.Next = next
	for topic, n := range res.Ready {
		s.publish(ctx, event{topic: topic, count: n})
	}
	return res, nil
}

// dueTopics lists the topics of buckets with work due at now.
func (s *Store) dueTopics(ctx context.Context, buckets []int, now int64) ([]string, error) {
	cmds := make(rueidis.Commands, len(buckets))
	for i, b := range buckets {
		cmds[i] = s.c.B().Zrange().Key(s.k.bucketDue(b)).Min("-inf").Max(strconv.FormatInt(now, 10)).
			Byscore().Limit(0, maxDueTopics).Build()
	}
	var out []string
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		topics, err := r.AsStrSlice()
		if err != nil {
			return nil, unavailable("tick: due topics", err)
		}
		out = append(out, topics...)
	}
	return out, nil
}

// tickTopics moves at most max due jobs of topics, the earliest first
// across all of them: with several topics it peeks each and bounds every
// topic's script by the max-th entry overall.
func (s *Store) tickTopics(ctx context.Context, topics []string, now int64, max int, bs map[string]store.Backoff) ([]moved, error) {
	cutAt, cutM := "", ""
	if len(topics) > 1 {
		var err error
		if cutAt, cutM, err = s.tickCut(ctx, topics, now, max); err != nil {
			return nil, err
		}
	}
	nowS := strconv.FormatInt(now, 10)
	var all []moved
	for _, topic := range topics {
		args := append([]string{nowS, strconv.Itoa(max), cutAt, cutM}, backoffArgs(bs, topic)...)
		arr, err := s.exec(ctx, "tick", tickScript, topic, args)
		if err != nil {
			return nil, err
		}
		acted, _ := arr[1].AsInt64()
		for i := 2; i+2 < len(arr); i += 3 {
			seq, _ := arr[i].AsInt64()
			at, _ := arr[i+1].AsInt64()
			kind, _ := arr[i+2].AsInt64()
			all = append(all, moved{topic, uint64(seq), at, kind, acted})
		}
		e, _ := arr[0].ToString()
		if err := s.refresh(ctx, topic, e); err != nil {
			return nil, err
		}
	}
	return all, nil
}

// tickCut peeks the due work of topics and returns the (time, member) of
// the max-th entry overall, or "" when at most max are due.
func (s *Store) tickCut(ctx context.Context, topics []string, now int64, max int) (string, string, error) {
	execs := make([]rueidis.LuaExec, len(topics))
	for i, t := range topics {
		execs[i] = rueidis.LuaExec{Keys: s.k.topic(t).slice(), Args: []string{strconv.FormatInt(now, 10), strconv.Itoa(max)}}
	}
	type entry struct {
		at int64
		m  string
	}
	var es []entry
	for _, r := range execMulti(ctx, s.c, tickPeekScript, execs) {
		flat, err := r.AsStrSlice()
		if err != nil {
			return "", "", unavailable("tick: peek", err)
		}
		for i := 0; i+1 < len(flat); i += 2 {
			at, _ := strconv.ParseInt(flat[i], 10, 64)
			es = append(es, entry{at, flat[i+1]})
		}
	}
	if len(es) <= max {
		return "", "", nil
	}
	slices.SortFunc(es, func(a, b entry) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		if a.m < b.m {
			return -1
		}
		return 1
	})
	last := es[max-1]
	return strconv.FormatInt(last.at, 10), last.m, nil
}

// refresh sets topic's due entry to e (its earliest pending, "" for none)
// and then lowers it again to what the topic holds now, so a put that
// lowered the entry between the tick script and the set is not undone.
func (s *Store) refresh(ctx context.Context, topic, e string) error {
	key := s.k.bucketDue(bucketOf(topic, s.opt.Buckets))
	var cmd rueidis.Completed
	if e == "" {
		cmd = s.c.B().Zrem().Key(key).Member(topic).Build()
	} else {
		at, _ := strconv.ParseFloat(e, 64)
		cmd = s.c.B().Zadd().Key(key).ScoreMember().ScoreMember(at, topic).Build()
	}
	if err := s.c.Do(ctx, cmd).Error(); err != nil {
		return unavailable("tick: index", err)
	}
	again, err := earliestScript.Exec(ctx, s.c, s.k.topic(topic).slice(), nil).ToString()
	if err != nil {
		return unavailable("tick: index", err)
	}
	if again == "" || again == e {
		return nil
	}
	at, _ := strconv.ParseFloat(again, 64)
	if err := s.c.Do(ctx, s.c.B().Zadd().Key(key).Lt().ScoreMember().ScoreMember(at, topic).Build()).Error(); err != nil {
		return unavailable("tick: index", err)
	}
	return nil
}

// result turns the moved entries into a TickResult, in (time, seq) order.
func result(all []moved) *store.TickResult {
	slices.SortFunc(all, func(a, b moved) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return cmpU(a.seq, b.seq)
	})
	res := &store.TickResult{Ready: map[string]int{}}
	for _, m := range all {
		switch m.kind {
		case 0:
			res.Ready[m.topic]++
			res.AddLateness(m.topic, time.Duration(m.now-m.at)*time.Millisecond)
		case 1:
			res.Ready[m.topic]++
		case 3:
			res.AddBackedOff(m.topic)
		default:
			res.AddBuried(m.topic)
		}
	}
	return res
}

// next is the earliest pending time of the leased buckets: p.Now when work
// is due already, zero when nothing is pending. An index entry can be
// early (a job was deleted or touched); next checks the earliest entry
// against its topic and repairs it until they agree.
func (s *Store) next(ctx context.Context, buckets []int, now int64) (time.Time, error) {
	for range 100 {
		topic, at, err := s.firstDue(ctx, buckets)
		if err != nil || topic == "" {
			return time.Time{}, err
		}
		if at <= now {
			return fromMS(now), nil
		}
		e, err := earliestScript.Exec(ctx, s.c, s.k.topic(topic).slice(), nil).ToString()
		if err != nil {
			return time.Time{}, unavailable("tick: next", err)
		}
		if e == strconv.FormatInt(at, 10) {
			return fromMS(at), nil
		}
		if err := s.refresh(ctx, topic, e); err != nil {
			return time.Time{}, err
		}
	}
	return fromMS(now), nil
}

// firstDue returns the topic with the earliest due entry of the buckets.
func (s *Store) firstDue(ctx context.Context, buckets []int) (string, int64, error) {
	cmds := make(rueidis.Commands, len(buckets))
	for i, b := range buckets {
		cmds[i] = s.c.B().Zrange().Key(s.k.bucketDue(b)).Min("0").Max("0").Withscores().Build()
	}
	best, bestAt := "", int64(0)
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		zs, err := r.AsZScores()
		if err != nil {
			return "", 0, unavailable("tick: next", err)
		}
		if len(zs) > 0 && (best == "" || int64(zs[0].Score) < bestAt) {
			best, bestAt = zs[0].Member, int64(zs[0].Score)
		}
	}
	return best, bestAt, nil
}

// sweep re-marks every topic of the given buckets with its earliest
// pending time. It repairs what a crash between a script and its bucket
// mark (reserve, release) left unmarked. It reads the topic registry, so
// it runs rarely: when buckets are taken over and every sweepEvery.
func (s *Store) sweep(ctx context.Context, buckets []int) error {
	names, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.k.topics()).Build()).AsStrSlice()
	if err != nil {
		return unavailable("sweep", err)
	}
	var execs []rueidis.LuaExec
	var topics []string
	for _, t := range names {
		if slices.Contains(buckets, bucketOf(t, s.opt.Buckets)) {
			topics = append(topics, t)
			execs = append(execs, rueidis.LuaExec{Keys: s.k.topic(t).slice()})
		}
	}
	var marks rueidis.Commands
	for i, r := range execMulti(ctx, s.c, earliestScript, execs) {
		e, err := r.ToString()
		if err != nil {
			return unavailable("sweep", err)
		}
		if at, err := strconv.ParseInt(e, 10, 64); err == nil {
			marks = append(marks, s.markDue(topics[i], at))
		}
	}
	return s.doAll(ctx, "sweep", marks)
}

// dueNow is an event that makes every timer step at once.
func dueNow() event { return event{due: delayq.TruncMilli(time.Now()).UnixMilli()} }

// backoffLua computes store.BackoffDelay in the tick script, the same
// float64 operations in the same order as the Go, so every store delays a
// job alike. ARGV[5..8] hold the topic's backoff (ARGV[5] "" for none).
// The 1000 is store.MaxBackoffSteps. mul32 multiplies mod 2^32 in halves so no product passes 2^53, where
// Lua's doubles would round.
const backoffLua = `
local function mul32(a, b)
  local bh, bl = math.floor(b / 65536), b % 65536
  return (((a * bh) % 65536) * 65536 + a * bl) % 4294967296
end
local function xor32(a, b) return bit.bxor(a, b) % 4294967296 end
local function jhash(s)
  local h = 2166136261
  for i = 1, #s do h = mul32(xor32(h, string.byte(s, i)), 16777619) end
  h = xor32(h, math.floor(h / 65536))
  h = mul32(h, 2246822507)
  h = xor32(h, math.floor(h / 8192))
  h = mul32(h, 3266489909)
  h = xor32(h, math.floor(h / 65536))
  return h
end
local function backoff(id, att)
  if ARGV[5] == nil or ARGV[5] == '' then return 0 end
  local initial, maxMS = tonumber(ARGV[5]), tonumber(ARGV[6])
  local factor, jitter = tonumber(ARGV[7]), tonumber(ARGV[8])
  if initial <= 0 then return 0 end
  if maxMS < initial then maxMS = initial end
  local d = initial
  if factor > 1 then
    local i = 1
    while i < math.min(att, 1000) and d < maxMS do d = d * factor; i = i + 1 end
  end
  if d > maxMS then d = maxMS end
  if jitter > 0 then
    local u = jhash(id .. ':' .. string.format('%d', att)) / 4294967296
    local spread = 2 * u - 1
    d = d * (1 + jitter * spread)
  end
  if d > maxMS then d = maxMS end
  if d < 0 then d = 0 end
  return math.floor(d)
end
`

// backoffArgs are the tick script's ARGV[5..8] for topic.
func backoffArgs(bs map[string]store.Backoff, topic string) []string {
	b, ok := bs[topic]
	if !ok {
		return []string{"", "", "", ""}
	}
	return []string{
		strconv.FormatInt(b.Initial.Milliseconds(), 10), strconv.FormatInt(b.Max.Milliseconds(), 10),
		strconv.FormatFloat(b.Factor, 'g', -1, 64), strconv.FormatFloat(b.Jitter, 'g', -1, 64),
	}
}
