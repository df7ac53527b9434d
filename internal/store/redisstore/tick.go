package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
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
// SCAN, nothing that grows with the number of pending jobs. On a Cluster
// the re-read also raises the topic's P:{t}:marked, a time the entry is
// known to be at or below, so a reserve whose new deadline is not
// earlier sends no mark (reserve.go: clusterMarkLua).

// tickPeekScript lists a topic's due work without moving it.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
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
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most jobs to move
//	ARGV[3]    -> time of the last entry that may move ("" = no bound)
//	ARGV[4]    -> member of the last entry that may move
//	ARGV[5..8] -> the topic's backoff: initial ms, max ms, factor, jitter ("" = none)
//	ARGV[9]    -> this instance's id (its own waiting mark does not count)
//	Returns:   {earliest pending or "", now acted at, 1 when ready jobs are to be published
//	           (another instance waits on the topic, waitedLua) else 0, seq, at, kind, ...};
//	           kind 0 delayed -> ready,
//	           1 TTR ran out -> ready, 2 TTR ran out -> buried (attempts spent),
//	           3 TTR ran out -> delayed by the backoff
var tickScript = newScript(backoffLua + tickTopicLua + waitedLua + `
local now = clock(ARGV[1])
local out, ready = {'', fmt(now), 0}, false
tickTopic(now, tonumber(ARGV[2]), ARGV[3], ARGV[4], ARGV[5] ~= '' and {ARGV[5], ARGV[6], ARGV[7], ARGV[8]} or nil,
  function(seq, at, kind)
    out[#out + 1] = seq; out[#out + 1] = at; out[#out + 1] = kind
    if kind < 2 then ready = true end
  end)
out[1] = earliest()
if ready and waited(K_B .. 'waiting', ARGV[9]) then out[3] = 1 end
return out
`)

// tickTopicLua defines tickTopic(now, max, cutAt, cutM, bo, emit): it
// makes the due work of the topic whose keys K_* name ready, in (time,
// seq) order, at most max jobs and none past (cutAt, cutM) when cutAt is
// not "", with the topic's backoff bo (see backoff), and calls emit(seq,
// at, kind) for each job it moved (kind as tickScript returns it).
const tickTopicLua = `
local function tickTopic(now, max, cutAt, cutM, bo, emit)
  local d = redis.call('ZRANGE', K_DELAYED, '-inf', fmt(now), 'BYSCORE', 'WITHSCORES', 'LIMIT', 0, max)
  local r = redis.call('ZRANGE', K_RESERVED, '-inf', fmt(now), 'BYSCORE', 'WITHSCORES', 'LIMIT', 0, max)
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
        local wait = backoff(j.id, tonumber(j.att), bo)
        if wait > 0 then j.state = 'delayed'; j.due = fmt(tonumber(dl) + wait); kind = 3 end
      end
    end
    place(seq, j)
    save(seq, j)
    emit(seq, at, kind)
    n = n + 1
  end
  return n
end
`

// tickOneScript is Tick in one step on a one-node Redis (onenode.go): it
// reads the due topics of the buckets, makes their due work ready (the
// earliest max jobs across all of them), sets each topic's bucket entry to
// its earliest pending time, publishes the ready counts of the topics
// another instance waits on (waitedLua) and finds the buckets' next due time,
// repairing early entries on the way. On a Cluster the same takes a round
// trip per step (due topics, peeks, a script per topic, each topic's entry
// set and re-read, the next time, the publish): at 2,000 jobs due a second
// that made a tick several round trips long, and each job waited for the
// tick that found it (issue 31, aim 4). Here a tick is one round trip and
// the entry is exact, since nothing runs between the move and the mark.
// The topics' keys are named in the script from the key prefix (useTopicLua),
// which Redis allows outside Cluster mode only.
//
//	KEYS       -> the due index of each bucket this instance leases
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most jobs to move
//	ARGV[3]    -> the key prefix
//	ARGV[4]    -> the events channel
//	ARGV[5]    -> this instance's id (the events' sender; its own waiting mark does not count)
//	ARGV[6..]  -> per topic with a backoff: topic, initial ms, max ms, factor, jitter
//	Returns:   {next due (unix ms; now when more is due) or "", then per job moved:
//	           topic, seq, at, kind, now acted at}; kind as tickScript's
var tickOneScript = newScript(waitedLua + backoffLua + tickTopicLua + useTopicLua + `
local now0, max, prefix = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
local bos = {}
for i = 6, #ARGV, 5 do bos[ARGV[i]] = {ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]} end
local topics, bucket = {}, {}
for b = 1, #KEYS do
  for _, t in ipairs(redis.call('ZRANGE', KEYS[b], '-inf', ARGV[1], 'BYSCORE', 'LIMIT', 0, ` + strconv.Itoa(maxDueTopics) + `)) do
    topics[#topics + 1] = t; bucket[t] = KEYS[b]
  end
end
-- with several topics, no topic moves past the max-th due entry of all
local cutAt, cutM = '', ''
if #topics > 1 then
  local es = {}
  for _, t in ipairs(topics) do
    useTopic(prefix, t)
    for _, key in ipairs({K_DELAYED, K_RESERVED}) do
      local page = redis.call('ZRANGE', key, '-inf', ARGV[1], 'BYSCORE', 'WITHSCORES', 'LIMIT', 0, max)
      for i = 1, #page, 2 do es[#es + 1] = {tonumber(page[i + 1]), page[i]} end
    end
  end
  if #es > max then
    table.sort(es, function(a, b) return a[1] < b[1] or (a[1] == b[1] and a[2] < b[2]) end)
    cutAt, cutM = fmt(es[max][1]), es[max][2]
  end
end
local out, woke = {''}, {}
for _, t in ipairs(topics) do
  useTopic(prefix, t)
  local now = clock(ARGV[1])
  local acted, n = fmt(now), 0
  tickTopic(now, max, cutAt, cutM, bos[t], function(seq, at, kind)
    out[#out + 1] = t; out[#out + 1] = seq; out[#out + 1] = at; out[#out + 1] = kind; out[#out + 1] = acted
    if kind < 2 then n = n + 1 end
  end)
  if n > 0 then woke[#woke + 1] = {t, n} end
  local e = earliest()
  if e == '' then redis.call('ZREM', bucket[t], t) else redis.call('ZADD', bucket[t], e, t) end
end
for _, w in ipairs(woke) do
  if waited(prefix .. ':{' .. w[1] .. '}:waiting', ARGV[5]) then
    redis.call('PUBLISH', ARGV[4], ARGV[5] .. ' ' .. w[1] .. ' ' .. w[2] .. ' 0')
  end
end
-- the next due time: an entry may be early (its job was deleted or
-- touched since); set it to its topic's earliest and look again
out[1] = fmt(now0)
for _ = 1, 100 do
  local best, at, key
  for b = 1, #KEYS do
    local z = redis.call('ZRANGE', KEYS[b], 0, 0, 'WITHSCORES')
    if #z > 0 and (not at or tonumber(z[2]) < at) then best, at, key = z[1], tonumber(z[2]), KEYS[b] end
  end
  if not best then out[1] = ''; break end
  if at <= now0 then break end
  useTopic(prefix, best)
  local e = earliest()
  if e ~= '' and tonumber(e) == at then out[1] = e; break end
  if e == '' then redis.call('ZREM', key, best) else redis.call('ZADD', key, e, best) end
end
return out
`)

// useTopicLua defines useTopic(prefix, t), which points the prelude's K_*
// at topic t's keys, for the one-node scripts that act on several topics.
// It is written from keys.topic, so the names cannot drift apart.
var useTopicLua = func() string {
	tk := keys{}.topic("")
	name := func(i int) string { return "b .. '" + strings.TrimPrefix(tk[i], ":{}:") + "'" }
	var b strings.Builder
	b.WriteString("\nlocal function useTopic(prefix, t)\n  local b = prefix .. ':{' .. t .. '}:'\n")
	fmt.Fprintf(&b, "  K_JOB, K_IDS, K_READY, K_AGE = %s, %s, %s, %s\n", name(0), name(1), name(2), name(3))
	fmt.Fprintf(&b, "  K_DELAYED, K_RESERVED, K_BURIED, K_PAUSE, K_NOW = %s, %s, %s, %s, %s\n", name(4), name(5), name(6), name(7), name(8))
	fmt.Fprintf(&b, "  K_RET, K_ENDED = %s, {finished = %s, deleted = %s, failed = %s}\nend\n", name(9), name(10), name(11), name(12))
	return b.String()
}()

// earliestScript reads a topic's earliest pending time.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	Returns:   the earliest delayed due or reserved deadline (unix ms), or ""
var earliestScript = newReadScript(`return earliest()`)

// refreshScript is refresh's re-read of a topic after it set the topic's
// bucket entry: the topic's earliest pending time, and P:{t}:marked
// raised to the entry refresh leaves (the lower of the time it set and
// the earliest), or deleted when it leaves none, so that a Cluster
// reserve that skips its mark on it (clusterMarkLua) never relies on an
// entry this raise moved past its deadline. The key is only raised,
// never lowered, here: two instances may refresh one topic at once (a
// bucket taken over), and each one's set is followed by its own re-read;
// only a reserve lowers it, together with the entry. An absent key stays
// absent (no knowledge); KEEPTTL keeps the reserve's markedFor.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> the time refresh set the entry to ("" = removed)
//	Returns:   the earliest delayed due or reserved deadline (unix ms), or ""
var refreshScript = newScript(markedLua + `
local e, set = earliest(), ARGV[1]
local left = set
if e ~= '' and (set == '' or e + 0 < set + 0) then left = e end
if left == '' then redis.call('DEL', K_MARKED); return e end
local m = redis.call('GET', K_MARKED)
if m and m + 0 < left + 0 then redis.call('SET', K_MARKED, left, 'KEEPTTL') end
return e
`)

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
	if s.oneNode {
		return s.tickOne(ctx, buckets, now, max, p.Backoff)
	}
	due, err := s.dueTopics(ctx, buckets, now)
	if err != nil {
		return nil, err
	}
	var all []moved
	var waited map[string]bool
	if len(due) > 0 {
		if all, waited, err = s.tickTopics(ctx, due, now, max, p.Backoff); err != nil {
			return nil, err
		}
	}
	res := result(all)
	// The other instances' consumers first: their wake-up need not wait
	// for the next due time's round trips. Only topics another instance
	// waits on (the tick script tested its marks).
	for topic, n := range res.Ready {
		if waited[topic] {
			s.publish(ctx, event{topic: topic, count: n})
		}
	}
	next, err := s.next(ctx, buckets, now)
	if err != nil {
		return nil, err
	}
	res.Next = next
	return res, nil
}

// tickOne is Tick on a one-node Redis: one script (tickOneScript).
func (s *Store) tickOne(ctx context.Context, buckets []int, now int64, max int, bs map[string]store.Backoff) (*store.TickResult, error) {
	if len(buckets) == 0 {
		return result(nil), nil
	}
	keys := make([]string, len(buckets))
	for i, b := range buckets {
		keys[i] = s.k.bucketDue(b)
	}
	args := []string{strconv.FormatInt(now, 10), strconv.Itoa(max), s.k.prefix, s.k.events(), s.opt.InstanceID}
	for t := range bs {
		if slices.Contains(buckets, bucketOf(t, s.opt.Buckets)) {
			args = append(append(args, t), backoffArgs(bs, t)...)
		}
	}
	arr, err := s.execKeys(ctx, "tick", tickOneScript, keys, args)
	if err != nil {
		return nil, err
	}
	var all []moved
	for i := 1; i+4 < len(arr); i += 5 {
		topic, _ := arr[i].ToString()
		seq, _ := arr[i+1].AsInt64()
		at, _ := arr[i+2].AsInt64()
		kind, _ := arr[i+3].AsInt64()
		acted, _ := arr[i+4].AsInt64()
		all = append(all, moved{topic, uint64(seq), at, kind, acted})
	}
	res := result(all)
	if next, err := arr[0].AsInt64(); err == nil {
		res.Next = fromMS(next)
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
// topic's script by the max-th entry overall. waited names the topics
// whose ready count is to be published (another instance waits there).
func (s *Store) tickTopics(ctx context.Context, topics []string, now int64, max int, bs map[string]store.Backoff) (all []moved, waited map[string]bool, err error) {
	cutAt, cutM := "", ""
	if len(topics) > 1 {
		if cutAt, cutM, err = s.tickCut(ctx, topics, now, max); err != nil {
			return nil, nil, err
		}
	}
	nowS := strconv.FormatInt(now, 10)
	waited = map[string]bool{}
	for _, topic := range topics {
		args := append(append([]string{nowS, strconv.Itoa(max), cutAt, cutM}, backoffArgs(bs, topic)...), s.opt.InstanceID)
		arr, err := s.exec(ctx, "tick", tickScript, topic, args)
		if err != nil {
			return nil, nil, err
		}
		acted, _ := arr[1].AsInt64()
		if w, _ := arr[2].AsInt64(); w == 1 {
			waited[topic] = true
		}
		for i := 3; i+2 < len(arr); i += 3 {
			seq, _ := arr[i].AsInt64()
			at, _ := arr[i+1].AsInt64()
			kind, _ := arr[i+2].AsInt64()
			all = append(all, moved{topic, uint64(seq), at, kind, acted})
		}
		e, _ := arr[0].ToString()
		if err := s.refresh(ctx, topic, e); err != nil {
			return nil, nil, err
		}
	}
	return all, waited, nil
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
// The re-read (refreshScript) also raises the topic's P:{t}:marked to
// the entry it leaves, which a Cluster reserve reads to skip its mark.
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
	again, err := refreshScript.Exec(ctx, s.c, s.k.topic(topic).slice(), []string{e}).ToString()
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
	if err := s.doAll(ctx, "sweep", marks); err != nil {
		return err
	}
	if s.oneNode {
		return s.trimEndedAll(ctx, topics)
	}
	return s.trimEndedCluster(ctx, topics)
}

// trimEndedScript trims a topic's ended indexes on one node (trimEnded):
// what ended at or before the cutoff leaves the index, and its seq's
// entry its shard. At most 16 rounds of 256 members per index a call;
// the next sweep takes the rest.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> the key prefix
//	ARGV[2]    -> the cutoff (unix ms)
//	Returns:   how many members it dropped
var trimEndedScript = newScript(`
local n = 0
for _, idx in pairs(K_ENDED) do
  for _ = 1, 16 do
    local m = trimEnded(ARGV[1], idx, ARGV[2])
    n = n + m
    if m < 256 then break end
  end
end
return n
`)

// trimEndedAll trims the ended indexes of topics on one node, where
// they have no TTL: a topic that stops ending jobs would otherwise keep
// its last window's members and their seq entries (deleteScript). The
// cutoff is this instance's retention back from its retention clock
// (every instance should run with the same --retain; with none, every
// member goes).
func (s *Store) trimEndedAll(ctx context.Context, topics []string) error {
	keep := max(s.opt.Retention.For.Milliseconds(), 0)
	cutoff := strconv.FormatInt(ms(s.opt.Retention.Clock()())-keep, 10)
	execs := make([]rueidis.LuaExec, len(topics))
	for i, t := range topics {
		execs[i] = rueidis.LuaExec{Keys: s.k.topic(t).slice(), Args: []string{s.k.prefix, cutoff}}
	}
	for _, r := range execMulti(ctx, s.c, trimEndedScript, execs) {
		if err := r.Error(); err != nil {
			return unavailable("sweep: trim ended", err)
		}
	}
	return nil
}

// endedStates are the retained states in the order the Cluster's trim
// scripts take their ended indexes.
var endedStates = []string{"finished", "deleted", "failed"}

// maxTrimPage is how many members of one ended index a round of the
// Cluster's trim takes, and maxTrimRounds how many rounds one sweep
// runs at most: 64 pages of 1,024 per index every sweepEvery keep up
// with about 2,000 retained jobs a second per topic and state; a topic
// above that is trimmed by the following sweeps, and readers skip the
// members older than the window meanwhile (listRetainedScript).
const (
	maxTrimPage   = 1024
	maxTrimRounds = 64
)

// endedPageScript reads a page of a topic's ended indexes on a Cluster:
// per index (endedStates), the members that ended at or before the
// cutoff, oldest first. It takes off a TTL an earlier build gave an
// index (it PEXPIREd each on every write), which would otherwise drop
// members whose seq entries nothing then removes; so it writes, and is
// no read-only script.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> the cutoff (unix ms)
//	ARGV[2]    -> most members per index
//	Returns:   per index the members (%020d seqs)
var endedPageScript = newScript(`
local out = {}
for i, st in ipairs({'finished', 'deleted', 'failed'}) do
  local idx = K_ENDED[st]
  redis.call('PERSIST', idx)
  out[i] = redis.call('ZRANGE', idx, '-inf', ARGV[1], 'BYSCORE', 'LIMIT', '0', ARGV[2])
end
return out
`)

// zremEndedScript removes members from a topic's ended indexes.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1..3] -> how many members of each index (endedStates) follow
//	ARGV[4..]  -> the members, index by index
//	Returns:   how many it removed
var zremEndedScript = newScript(`
local b, n = 4, 0
for i, st in ipairs({'finished', 'deleted', 'failed'}) do
  local c = ARGV[i] + 0
  if c > 0 then n = n + redis.call('ZREM', K_ENDED[st], unpack(ARGV, b, b + c - 1)) end
  b = b + c
end
return n
`)

// trimEndedCluster trims the ended indexes of topics on a Cluster, where
// a retained job's seq -> topic entry stays in its shard (another
// slot's key than the topic's, usually on another master) and the index
// has no TTL: the finish scripts cannot reach the shards, so this is
// what drops both once the job's window has passed. Each round reads a
// page of every index (endedPageScript), drops the pages' seqs from
// their shards (one HDEL per shard, in one pipeline), then removes
// exactly those members (zremEndedScript), in that order: a crash in
// between leaves at worst members whose entries are gone, dropped again
// harmlessly by the next sweep, never an entry whose member is gone.
// The cutoff is as trimEndedAll's.
func (s *Store) trimEndedCluster(ctx context.Context, topics []string) error {
	keep := max(s.opt.Retention.For.Milliseconds(), 0)
	cutoff := strconv.FormatInt(ms(s.opt.Retention.Clock()())-keep, 10)
	page := strconv.Itoa(maxTrimPage)
	for range maxTrimRounds {
		if len(topics) == 0 {
			return nil
		}
		execs := make([]rueidis.LuaExec, len(topics))
		for i, t := range topics {
			execs[i] = rueidis.LuaExec{Keys: s.k.topic(t).slice(), Args: []string{cutoff, page}}
		}
		var more []string // topics with a full page: another round
		var zrems []rueidis.LuaExec
		shards := map[string][]string{} // shard -> seqs to drop
		var order []string
		for i, r := range execMulti(ctx, s.c, endedPageScript, execs) {
			arr, err := r.ToArray()
			if err != nil {
				return unavailable("sweep: trim ended", err)
			}
			if len(arr) != len(endedStates) {
				return fmt.Errorf("redisstore: sweep: trim ended: %d pages for %d indexes", len(arr), len(endedStates))
			}
			args := make([]string, len(endedStates), 3+maxTrimPage)
			full := false
			for k, a := range arr {
				members, err := a.AsStrSlice()
				if err != nil {
					return fmt.Errorf("redisstore: sweep: trim ended: %w", err)
				}
				args[k] = strconv.Itoa(len(members))
				full = full || len(members) == maxTrimPage
				for _, m := range members {
					seq, err := strconv.ParseUint(m, 10, 64)
					if err != nil {
						return fmt.Errorf("redisstore: sweep: trim ended: member %q of %s: %w", m, topics[i], err)
					}
					sh := s.k.seqShard(seq)
					if _, ok := shards[sh]; !ok {
						order = append(order, sh)
					}
					shards[sh] = append(shards[sh], strconv.FormatUint(seq, 10))
					args = append(args, m)
				}
			}
			if len(args) > len(endedStates) {
				zrems = append(zrems, rueidis.LuaExec{Keys: execs[i].Keys, Args: args})
			}
			if full {
				more = append(more, topics[i])
			}
		}
		if len(zrems) == 0 {
			return nil
		}
		hdels := make(rueidis.Commands, len(order))
		for i, sh := range order {
			hdels[i] = s.c.B().Hdel().Key(sh).Field(shards[sh]...).Build()
		}
		for _, r := range s.c.DoMulti(ctx, hdels...) {
			if err := r.Error(); err != nil {
				return unavailable("sweep: trim ended", err)
			}
		}
		for _, r := range execMulti(ctx, s.c, zremEndedScript, zrems) {
			if err := r.Error(); err != nil {
				return unavailable("sweep: trim ended", err)
			}
		}
		topics = more
	}
	return nil
}

// dueNow is an event that makes every timer step at once.
func dueNow() event { return event{due: delayq.TruncMilli(time.Now()).UnixMilli()} }

// backoffLua computes store.BackoffDelay in the tick script, the same
// float64 operations in the same order as the Go, so every store delays a
// job alike. bo holds the topic's backoff as strings {initial ms, max ms,
// factor, jitter}, nil for none (backoffArgs).
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
local function backoff(id, att, bo)
  if bo == nil or bo[1] == nil or bo[1] == '' then return 0 end
  local initial, maxMS = tonumber(bo[1]), tonumber(bo[2])
  local factor, jitter = tonumber(bo[3]), tonumber(bo[4])
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
