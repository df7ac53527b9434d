package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Grouped reserves.
//
// Concurrent reserves of one topic (a consumer's reserve names one tube,
// or an HTTP reserve one topic) go through a store.Line as finishes do
// (finish.go), on one node and on a Cluster alike: the calls that arrive
// while one group is in flight are written together, one script per
// topic (reserveGroupScript) in one round trip, and a lone call goes at
// once, through the single-call script. Each call is served as if
// alone, in the order taken: it takes up to its own Max of the best
// ready jobs left after the calls before it, acts at its own Now (never
// before the topic's clock, which the group moves forward call by
// call), and its jobs' TTRs begin at that call's own rounded-up Now
// (store.BeginTTR), so a call gathered behind another never gets a TTR
// that began earlier than it asked. Reserves of several topics keep
// their own path (a peek of each, then one script per topic with a
// bound).
//
// The group's earliest new deadline lowers the topic's timer bucket
// entry and is published to the other instances' timers only when it
// lowered the entry and another instance listens: on one node in the
// script, on a Cluster (the bucket is another slot's) after it, once per
// group (markDeadlines), and only when the topic's P:{t}:marked does not
// show the entry at or below it already (clusterMarkLua).

// reserveCall is one single-topic Reserve waiting for its group.
type reserveCall struct {
	topic string
	now   string // unix ms
	begin string // the caller's now rounded up, unix ms (store.BeginTTR)
	max   int
	by    string

	jobs []*delayq.Job // the answer, set before the group returns
	err  error
}

// reserveLine is the store's line of single-topic Reserve calls.
func (s *Store) reserveLine() *store.Line[*reserveCall] {
	return s.reserves.get(func(l *store.Line[*reserveCall]) {
		l.Write = s.writeReserves
		l.Ctx = s.ctx // a gathered group writes for all its callers
		l.MaxJobs = maxFinishGroup
		l.Size = func(c *reserveCall) (int, int) { return c.max, 0 }
	})
}

// reserveOne is Reserve of one topic, through the line.
func (s *Store) reserveOne(ctx context.Context, topic string, max int, now, begin, by string) ([]*delayq.Job, error) {
	c := &reserveCall{topic: topic, now: now, begin: begin, max: max, by: by}
	if err := s.reserveLine().Do(ctx, c); err != nil {
		return []*delayq.Job{}, fmt.Errorf("redisstore: reserve: %w", err)
	}
	return c.jobs, c.err
}

// writeReserves writes one group of reserves under ctx (a lone call's
// caller's, a gathered group's the store's): one script per topic, in
// one round trip, then on a Cluster the marks of the topics' buckets;
// and answers each call.
func (s *Store) writeReserves(ctx context.Context, calls []*reserveCall) {
	if len(calls) == 1 {
		s.reserveAlone(ctx, calls[0])
		return
	}
	if err := s.check(); err != nil {
		for _, c := range calls {
			c.err = err
		}
		return
	}
	topics, byTopic := groupByTopic(calls, func(c *reserveCall) string { return c.topic })
	execs := make([]rueidis.LuaExec, len(topics))
	for i, t := range topics {
		group := byTopic[t]
		args := make([]string, 5, 5+4*len(group))
		copy(args, []string{t, s.k.events(), s.opt.InstanceID, s.fan.own(), strconv.Itoa(len(group))})
		for _, c := range group {
			args = append(args, c.now, strconv.Itoa(c.max), c.begin, c.by)
		}
		keys := s.k.topic(t).slice()
		if s.oneNode {
			keys = append(keys, s.k.bucketDue(bucketOf(t, s.opt.Buckets)))
		}
		execs[i] = rueidis.LuaExec{Keys: keys, Args: args}
	}
	results, werrs := s.execGroups(ctx, "reserve", reserveGroupScript, execs)
	dues := map[string]int64{} // each topic's earliest new deadline
	for i, t := range topics {
		group, werr := byTopic[t], werrs[i]
		arr, err := results[i].ToArray()
		if err != nil {
			var re *rueidis.RedisError
			if errors.As(err, &re) {
				// The script failed before it wrote anything (it reads
				// every record first): each call alone.
				s.log.Warn("redisstore: a group of reserves failed; writing each alone", "topic", t, "err", err)
				for _, c := range group {
					s.reserveAlone(ctx, c)
				}
				continue
			}
			for _, c := range group {
				c.jobs, c.err = []*delayq.Job{}, unavailable("reserve", err)
			}
			continue
		}
		// {count, deadline or "", record...} per call
		for _, c := range group {
			c.jobs = []*delayq.Job{}
			if len(arr) < 2 {
				c.err = fmt.Errorf("redisstore: reserve: short reply")
				continue
			}
			k, _ := arr[0].AsInt64()
			if d, err := arr[1].AsInt64(); err == nil && (dues[t] == 0 || d < dues[t]) {
				dues[t] = d // on one node the script marked it
			}
			arr = arr[2:]
			if int(k) > len(arr) {
				c.err = fmt.Errorf("redisstore: reserve: short reply")
				continue
			}
			for _, m := range arr[:k] {
				r, err := decodeJob(m)
				if err != nil {
					c.err = unavailable("reserve: decode", err)
					break
				}
				c.jobs = append(c.jobs, r.job)
				s.topicOf.add(r.job.Seq, t)
			}
			arr = arr[k:]
			if c.err == nil && werr != nil {
				// Reserved, but its replicas did not confirm it: as alone,
				// the error and no jobs (they come back after their TTR).
				c.jobs, c.err = []*delayq.Job{}, werr
			}
		}
	}
	if !s.oneNode {
		// Marked whatever the replicas said: the jobs are reserved.
		s.markDeadlines(ctx, dues)
	}
}

// reserveAlone is one call written by the single-call script.
func (s *Store) reserveAlone(ctx context.Context, c *reserveCall) {
	c.jobs, c.err = s.reserveTopics(ctx, map[string]share{c.topic: {n: c.max}}, c.now, c.begin, c.by)
}

// reserveGroupScript is reserveScript for the calls of one group, all of
// one topic.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	KEYS[2]    -> on one node the topic's timer bucket, lowered to the
//	              earliest new deadline; none on a Cluster, where the
//	              caller marks it after (markDeadlines)
//	ARGV[1]    -> the topic
//	ARGV[2]    -> the events channel (listenedLua)
//	ARGV[3]    -> this instance's id
//	ARGV[4]    -> how many subscribers are this instance's
//	ARGV[5]    -> number of calls n
//	ARGV[6..]  -> per call: now (unix ms), most jobs, the caller's exact
//	              now rounded up (unix ms: its TTRs begin there unless the
//	              topic's clock is later), who reserves
//	Returns:   per call: how many jobs k, its earliest new deadline or
//	           "" (on a Cluster "" for every call when the group's
//	           soonest need not be marked: clusterMarkLua), then its k
//	           records
var reserveGroupScript = newScript(listenedLua + markedLua + clusterMarkLua + `
local n = ARGV[5] + 0
local v
if KEYS[2] then v = redis.call('MGET', K_NOW, K_PAUSE) else v = redis.call('MGET', K_NOW, K_PAUSE, K_MARKED) end
local lastS, pause = v[1], v[2] and v[2] + 0
local last = lastS and lastS + 0
local total = 0
for i = 1, n do total = total + ARGV[5 + (i - 1) * 4 + 2] end
-- every score is 0: lexical order is rank order
local members = redis.call('ZRANGE', K_READY, '-', '+', 'BYLEX', 'LIMIT', '0', fmt(total))
-- Every record is read before anything is written, so one that cannot
-- be read fails the script with nothing done.
local jobs = {}
if #members > 0 then
  local keys = {}
  for k, m in ipairs(members) do keys[k] = K_JOB .. unpad(string.sub(m, 11)) end
  local raws = redis.call('MGET', unpack(keys))
  for k, m in ipairs(members) do
    local seq = unpad(string.sub(m, 11))
    -- not a string: a layout 1 hash (load reads it)
    if raws[k] then jobs[k] = cmsgpack.unpack(raws[k]) else jobs[k] = load(seq) end
    if not jobs[k] then return redis.error_reply('ready job ' .. seq .. ' has no record') end
  end
end
local out, soonest, moved, next, heads = {}, nil, false, 1, {}
-- the records go in one MSET (one command and one AOF entry for the
-- group; a SET per job cost Redis some 5,000 instructions each besides
-- its work)
local ready, age, reserved, recs = {}, {}, {}, {}
for i = 1, n do
  local b = 5 + (i - 1) * 4
  -- the topic's clock, as clockAt: never back, written once below
  local nowS = ARGV[b + 1]
  local nowN = nowS + 0
  if last and last >= nowN then nowS = lastS
  else last, lastS, moved = nowN, nowS, true end
  local head = #out + 1
  out[head], out[head + 1] = 0, ''
  heads[#heads + 1] = head
  if not (pause and last < pause) then
    local begin, want = math.max(last, ARGV[b + 3] + 0), ARGV[b + 2] + 0
    local got, mine = 0, nil
    while got < want and next <= #members do
      local m, j = members[next], jobs[next]
      next = next + 1
      local ps = string.sub(m, 11) -- the seq as the other indexes pad it
      local seq = unpad(ps)
      ready[#ready + 1] = m
      age[#age + 1] = ps
      j.state = 'reserved'
      incr(j, 'att')
      j.res = seq .. '-' .. j.att
      hstart(j, nowS, ARGV[b + 4])
      -- a ready job put with Due just past a caller's Now still gets a full TTR
      local deadline = math.max(begin, j.due + 0) + j.ttr
      j.deadline = fmt(deadline)
      reserved[#reserved + 1] = j.deadline
      reserved[#reserved + 1] = ps
      local p = pack(j)
      recs[#recs + 1] = K_JOB .. seq
      recs[#recs + 1] = p
      got = got + 1
      out[#out + 1] = p
      if not mine or deadline < mine then mine = deadline end
    end
    out[head] = got
    if mine then
      out[head + 1] = fmt(mine)
      if not soonest or mine < soonest then soonest = mine end
    end
  end
end
if #ready > 0 then
  callIn('MSET', nil, recs)
  redis.call('ZREM', K_READY, unpack(ready))
  redis.call('ZREM', K_AGE, unpack(age))
  redis.call('ZADD', K_RESERVED, unpack(reserved))
end
if moved then redis.call('SET', K_NOW, lastS) end
-- one node: published only when it lowered the bucket's entry (else
-- the bucket's timer steps at the entry, at or before it, anyway)
-- a Cluster: no call's deadline is to be marked when the entry is at or
-- below the soonest already (clusterMarkLua)
if soonest and KEYS[2] then
  local d = fmt(soonest)
  if redis.call('ZADD', KEYS[2], 'LT', 'CH', d, ARGV[1]) == 1 and listened(ARGV[2], ARGV[4]) then
    redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' - 0 ' .. d)
  end
elseif soonest and not clusterMark(v[3], soonest, fmt(soonest)) then
  for _, h in ipairs(heads) do out[h + 1] = '' end
end
return out
`)
