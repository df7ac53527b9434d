package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// reserveScript reserves the best ready jobs of one topic.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most jobs to reserve
//	ARGV[3]    -> last ready member that may be taken ("" = no bound)
//	ARGV[4]    -> the caller's exact now rounded up (unix ms): TTRs begin
//	              there, not up to a millisecond before it (store.BeginTTR)
//	ARGV[5]    -> who reserves (the attempt's By)
//	ARGV[6]    -> the topic (one-node only)
//	ARGV[7]    -> the events channel the earliest new deadline is
//	              published on when another instance listens (one-node
//	              only; listenedLua)
//	ARGV[8]    -> this instance's id (one-node only)
//	ARGV[9]    -> how many subscribers are this instance's (one-node only)
//	KEYS[2]    -> on a one-node Redis, the topic's timer bucket, lowered
//	              to the earliest new deadline here (onenode.go); on a
//	              Cluster the caller marks it and publishes after, when
//	              the script returns the deadline (clusterMarkLua)
//	Returns:   {earliest new deadline to mark or "", record, record, ...}
var reserveScript = newScript(listenedLua + markedLua + clusterMarkLua + `
-- the topic's clock and its pause in one command (on a Cluster, and
-- what its bucket entry is known to be at or below)
local v
if KEYS[2] then v = redis.call('MGET', K_NOW, K_PAUSE) else v = redis.call('MGET', K_NOW, K_PAUSE, K_MARKED) end
local now, nowS = clockAt(v[1], ARGV[1])
local max, last = ARGV[2] + 0, ARGV[3]
local begin = math.max(now, ARGV[4] + 0)
if v[2] and now < v[2] + 0 then return {''} end
-- every score is 0: lexical order is rank order
local upto = '+'
if last ~= '' then upto = '[' .. last end
local members = redis.call('ZRANGE', K_READY, '-', upto, 'BYLEX', 'LIMIT', '0', ARGV[2])
local out, soonest = {''}, nil
for _, m in ipairs(members) do
  local ps = string.sub(m, 11) -- the seq as the other indexes pad it
  local seq = unpad(ps)
  local j = load(seq)
  redis.call('ZREM', K_READY, m)
  redis.call('ZREM', K_AGE, ps)
  j.state = 'reserved'
  incr(j, 'att')
  j.res = seq .. '-' .. j.att
  hstart(j, nowS, ARGV[5])
  -- a ready job put with Due just past a caller's Now still gets a full TTR
  local deadline = math.max(begin, j.due + 0) + j.ttr
  j.deadline = fmt(deadline)
  -- scores and TTLs go to Redis as strings: a Lua number is formatted
  -- with sprintf on every call
  redis.call('ZADD', K_RESERVED, j.deadline, ps)
  local p = pack(j)
  redis.call('SET', K_JOB .. seq, p)
  if not soonest or deadline < soonest then soonest = deadline end
  out[#out + 1] = p
end
if soonest then
  out[1] = fmt(soonest)
  -- one node: published only when it lowered the bucket's entry (else
  -- the bucket's timer steps at the entry, at or before it, anyway)
  if KEYS[2] then
    if redis.call('ZADD', KEYS[2], 'LT', 'CH', out[1], ARGV[6]) == 1 and listened(ARGV[7], ARGV[9]) then
      redis.call('PUBLISH', ARGV[7], ARGV[8] .. ' - 0 ' .. out[1])
    end
  elseif not clusterMark(v[3], soonest, out[1]) then out[1] = '' end
end
return out
`)

// markedFor is how long a Cluster reserve's P:{t}:marked lives
// (clusterMarkLua): the longest a stale value can stop the topic's
// reserves from marking its bucket (a mark lost after its script, an
// instance of an earlier build raising the entry) before the next
// reserve after it marks again. It costs at most one mark per topic per
// markedFor besides the marks that lower the entry.
const markedFor = time.Second

// clusterMarkLua defines clusterMark(m, d, ds) for the Cluster reserve
// scripts, whose topic's timer bucket entry lives in another slot and is
// marked by the caller after the script (markDeadlines): one more
// command, usually to another master, per reserve group (issue 31). m
// is P:{t}:marked as read (false when absent), d the earliest new
// deadline (a number) and ds the same as a string. It returns true when
// the caller must mark d, and then holds d in P:{t}:marked; false when
// the entry is at or below m <= d already, so the bucket's timer steps
// there anyway and then finds d (tick.go: next), and a mark would change
// nothing.
//
// P:{t}:marked holds a time the entry is at or below once the marks
// and refreshes in flight land, or is absent (no knowledge: mark, as
// before it existed). Writers that only lower the entry (puts, releases,
// marks, the sweep) keep that true whatever they do with the key. The
// only writer that raises the entry, the tick's refresh (set, re-read the
// topic, lower again), raises the key to the entry it leaves
// (refreshScript) after its set, in the topic's slot; a reserve between
// its set and its re-read is seen by the re-read, which lowers the entry
// to it. With one consumer per topic (reserve, delete, reserve...) the
// entry still holds an earlier finished job's deadline until the bucket's
// timer passes it, so most reserves skip their mark.
//
// A value can be wrong the other way, too low, only when a mark or a
// refresh was cut short (a network error or a crash between its steps;
// a failover that lost the entry's write) or an instance of an earlier
// build raised the entry: the key expires markedFor after the reserve
// that set it, so the next reserve after that marks again, and the sweep
// (sweepEvery) lowers the entry in any case.
var clusterMarkLua = `
local function clusterMark(m, d, ds)
  if m and d >= m + 0 then return false end
  redis.call('SET', K_MARKED, ds, 'PX', '` + strconv.FormatInt(markedFor.Milliseconds(), 10) + `')
  return true
end
`

// Reserve implements store.Store. One topic is one script. Several topics
// live in different Cluster slots, so Reserve first peeks the best ready
// members of each (one pipeline), picks the p.Max best overall, and then
// reserves from each topic up to its share, bounded by the last member
// picked there. A job taken by another instance in between is simply not
// returned: each script moves only jobs still ready.
func (s *Store) Reserve(ctx context.Context, p store.ReserveParams) ([]*delayq.Job, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	topics := uniq(p.Topics)
	if p.Max <= 0 || len(topics) == 0 {
		return []*delayq.Job{}, nil
	}
	now := strconv.FormatInt(ms(p.Now), 10)
	begin := ceilMSString(p.Now)
	if len(topics) == 1 {
		return s.reserveOne(ctx, topics[0], p.Max, now, begin, p.By) // grouped: reservegroup.go
	}
	shares, err := s.pickShares(ctx, topics, p.Max, now)
	if err != nil || len(shares) == 0 {
		return []*delayq.Job{}, err
	}
	return s.reserveTopics(ctx, shares, now, begin, p.By)
}

// ceilMSString is t in unix ms rounded up: where a TTR started at t
// begins in store precision (store.BeginTTR).
func ceilMSString(t time.Time) string { return msString(delayq.CeilMilli(t)) }

func uniq(in []string) []string {
	var out []string
	for _, t := range in {
		if !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out
}

// share is how many jobs to reserve from a topic, and the last member.
type share struct {
	n    int
	last string
}

// pickShares peeks every topic and splits max among them in serving
// order. Ready members sort as "priority.seq", so plain string order is
// priority-then-seq order across topics too.
func (s *Store) pickShares(ctx context.Context, topics []string, max int, now string) (map[string]share, error) {
	heads, err := s.peekTopics(ctx, topics, max, now)
	if err != nil {
		return nil, err
	}
	type cand struct{ member, topic string }
	var cands []cand
	for i, members := range heads {
		for _, m := range members {
			cands = append(cands, cand{m, topics[i]})
		}
	}
	slices.SortFunc(cands, func(a, b cand) int {
		if a.member < b.member {
			return -1
		}
		return 1
	})
	shares := map[string]share{}
	for _, c := range cands[:min(max, len(cands))] {
		shares[c.topic] = share{n: shares[c.topic].n + 1, last: c.member}
	}
	return shares, nil
}

// peekTopics returns each topic's best ready members (up to max; none
// while it is paused), in the order of topics. On one node one script
// reads them all (peekManyScript); on a Cluster the topics live in
// different slots, so each is one script, all in one pipeline.
func (s *Store) peekTopics(ctx context.Context, topics []string, max int, now string) ([][]string, error) {
	out := make([][]string, len(topics))
	if s.oneNode {
		arr, err := s.execKeys(ctx, "reserve: peek", peekManyScript, s.k.topic(topics[0]).slice(),
			append([]string{now, strconv.Itoa(max), s.k.prefix}, topics...))
		if err != nil {
			return nil, err
		}
		if len(arr) != len(topics) {
			return nil, unavailable("reserve: peek", fmt.Errorf("%d answers for %d topics", len(arr), len(topics)))
		}
		for i, r := range arr {
			if out[i], err = r.AsStrSlice(); err != nil {
				return nil, unavailable("reserve: peek", err)
			}
		}
		return out, nil
	}
	// A Cluster's topics are in different slots: per topic its pause and
	// clock (one MGET: same slot) and its best ready members, plain
	// commands in one pipeline. A read script per topic cost Redis some
	// five times as much: 10 topics were 10.6 EVALSHA_RO per job at 25 µs
	// each (issue 31), the largest part of a Cluster's reserve of several
	// topics.
	cmds := make(rueidis.Commands, 0, 2*len(topics))
	for _, t := range topics {
		tk := s.k.topic(t)
		cmds = append(cmds, s.c.B().Mget().Key(tk.pauseKey(), tk.nowKey()).Build(),
			s.c.B().Zrange().Key(tk.readyKey()).Min("0").Max(strconv.Itoa(max-1)).Build())
	}
	at, err := strconv.ParseInt(now, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("redisstore: reserve: now %q: %w", now, err)
	}
	rs := s.c.DoMulti(ctx, cmds...)
	for i := range topics {
		vs, err := rs[2*i].ToArray()
		if err != nil {
			return nil, unavailable("reserve: peek", err)
		}
		pn := make([]string, len(vs))
		for k, v := range vs {
			pn[k], _ = v.ToString() // "" when unset
		}
		if paused(pn, at) {
			out[i] = []string{}
			continue
		}
		if out[i], err = rs[2*i+1].AsStrSlice(); err != nil {
			return nil, unavailable("reserve: peek", err)
		}
	}
	return out, nil
}

// paused reports whether a topic whose pause end and clock (MGET of
// both, "" or nil when unset) are pn is paused at now (unix ms): as the
// scripts' clockRead, the topic's time is now or its clock if later.
func paused(pn []string, now int64) bool {
	if len(pn) != 2 || pn[0] == "" {
		return false
	}
	until, err := strconv.ParseInt(pn[0], 10, 64)
	if err != nil {
		return false
	}
	if c, err := strconv.ParseInt(pn[1], 10, 64); err == nil && c > now {
		now = c
	}
	return now < until
}

// peekManyScript is peekReadyScript for several topics at once, on a
// one-node Redis (it names the topics' keys from the prefix, which only
// one node allows): a reserve of ten topics was ten scripts before it
// reserved anything, and Redis spent more on them than on the reserve.
//
//	KEYS[1]    -> the first topic's key prefix (unused: the scripts'
//	              prelude names its keys; routing only)
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most members to return per topic
//	ARGV[3]    -> the key prefix
//	ARGV[4..]  -> the topics
//	Returns:   per topic, its ready members in serving order (none when
//	           it is paused), in the order of ARGV
var peekManyScript = newReadScript(`
local now, out = tonumber(ARGV[1]), {}
for i = 4, #ARGV do
  local b = ARGV[3] .. ':{' .. ARGV[i] .. '}:'
  -- the topic's pause and clock, as clockRead: paused while its clock
  -- (ARGV's now, or the latest now it was acted at) is before the end
  local v = redis.call('MGET', b .. 'pause', b .. 'now')
  local paused = false
  if v[1] then
    local n = now
    if v[2] and tonumber(v[2]) > n then n = tonumber(v[2]) end
    paused = n < tonumber(v[1])
  end
  if paused then out[#out + 1] = {}
  else out[#out + 1] = redis.call('ZRANGE', b .. 'ready', 0, tonumber(ARGV[2]) - 1) end
end
return out
`)

// reserveTopics runs the reserve script on each topic with a share; on
// one node each script lowers its topic's bucket entry to its new
// earliest deadline and tells the other instances' timers, on a Cluster
// markDeadlines does after them.
func (s *Store) reserveTopics(ctx context.Context, shares map[string]share, now, begin, by string) ([]*delayq.Job, error) {
	out := []*delayq.Job{}
	dues := map[string]int64{}
	var rerr error
	for topic, sh := range shares {
		var arr []rueidis.RedisMessage
		if s.oneNode {
			arr, rerr = s.execKeys(ctx, "reserve", reserveScript, append(s.k.topic(topic).slice(), s.k.bucketDue(bucketOf(topic, s.opt.Buckets))),
				[]string{now, strconv.Itoa(sh.n), sh.last, begin, by, topic, s.k.events(), s.opt.InstanceID, s.fan.own()})
		} else {
			arr, rerr = s.exec(ctx, "reserve", reserveScript, topic, []string{now, strconv.Itoa(sh.n), sh.last, begin, by})
		}
		if len(arr) > 0 {
			if d, err := arr[0].AsInt64(); err == nil {
				dues[topic] = d
			}
		}
		if rerr != nil {
			// Not run, or run and not confirmed by the replicas: the
			// error, and not this topic's jobs (reserved, they come back
			// after their TTR, which is marked below).
			break
		}
		for _, m := range arr[1:] {
			r, err := decodeJob(m)
			if err != nil {
				rerr = unavailable("reserve: decode", err)
				break
			}
			out = append(out, r.job)
			s.topicOf.add(r.job.Seq, topic)
		}
		if rerr != nil {
			break
		}
	}
	slices.SortFunc(out, func(a, b *delayq.Job) int {
		if a.Priority != b.Priority {
			return cmpU(uint64(a.Priority), uint64(b.Priority))
		}
		return cmpU(a.Seq, b.Seq)
	})
	if !s.oneNode {
		s.markDeadlines(ctx, dues)
	}
	return out, rerr
}

// markDeadlines lowers each topic's entry in its timer bucket's due
// index to its earliest new deadline (dues, unix ms) after a reserve
// script that could not (a Cluster's, whose bucket is another slot's,
// when it returned the deadline because P:{t}:marked did not show the
// entry at or below it already: clusterMarkLua; reserveJobScript's,
// always), in one round trip (ZADD LT CH), and publishes the
// earliest deadline that lowered an entry, when another instance listens
// (heard). An entry it did not lower is at or before the deadline
// already, so the bucket's timer, whichever instance holds it, steps
// there anyway and then finds the next (tick.go: next); an instance that
// takes the bucket over sweeps it and steps at once (leases.go). So the
// one-node scripts publish, and so a Cluster does.
//
// The jobs are reserved whatever happens now; a lost mark only delays
// their TTR expiry until the next reserve of the topic after its
// P:{t}:marked expires (markedFor) marks again, or the sweep (tick.go,
// sweepEvery) repairs it. Not the
// caller's ctx: a client that hangs up now must not cost its jobs their
// marks (rueidis's own timeouts bound this).
func (s *Store) markDeadlines(ctx context.Context, dues map[string]int64) {
	if len(dues) == 0 {
		return
	}
	ctx = context.WithoutCancel(ctx)
	topics := make([]string, 0, len(dues))
	cmds := make(rueidis.Commands, 0, len(dues))
	for t, d := range dues {
		topics = append(topics, t)
		cmds = append(cmds, s.c.B().Zadd().Key(s.k.bucketDue(bucketOf(t, s.opt.Buckets))).Lt().Ch().
			ScoreMember().ScoreMember(float64(d), t).Build())
	}
	var lowered int64
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		n, err := r.AsInt64()
		if err != nil {
			s.log.Warn("redisstore: could not mark a deadline or due time; the sweep will", "topic", topics[i], "err", err)
			continue
		}
		if d := dues[topics[i]]; n == 1 && (lowered == 0 || d < lowered) {
			lowered = d
		}
	}
	if lowered != 0 {
		e := event{due: lowered}
		if s.heard(ctx, e) {
			s.publish(ctx, e)
		}
	}
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// dueTime converts unix ms to a time for events.
func dueTime(v int64) time.Time { return fromMS(v) }

// reserveJobScript reserves one chosen job (beanstalkd reserve-job),
// whatever its topic's pause.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> "i" (by id) or "s" (by seq)
//	ARGV[2]    -> the id or seq
//	ARGV[3]    -> now (unix ms)
//	ARGV[4]    -> the caller's exact now rounded up (unix ms), where the
//	              TTR begins unless the topic's clock is later
//	ARGV[5]    -> who reserves (the attempt's By)
//	Returns:   {"OK", record} or {"STATE"} when it is reserved already
var reserveJobScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if j.state == 'reserved' then return {'STATE'} end
unplace(seq, j)
j.state = 'reserved'
incr(j, 'att')
j.res = seq .. '-' .. j.att
local now = clock(ARGV[3])
hstart(j, fmt(now), ARGV[5])
j.deadline = fmt(math.max(now, tonumber(ARGV[4])) + tonumber(j.ttr))
place(seq, j)
return {'OK', save(seq, j)}
`)

// ReserveJob implements store.Store.
func (s *Store) ReserveJob(ctx context.Context, p store.ReserveJobParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "reserve job", reserveJobScript, p.Ref, msString(p.Now), ceilMSString(p.Now), p.By)
	if err != nil {
		return nil, err
	}
	s.markDeadlines(ctx, map[string]int64{r.job.Topic: ms(r.job.Deadline)})
	return r.job, nil
}
