package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Grouped finishes.
//
// Concurrent Delete calls (a consumer's finish, an operator's delete) go
// through a store.Line, on one node and on a Cluster alike: the calls
// that arrive while one group is in flight are written together, one
// script per topic (deleteGroupScript) in one round trip, and a lone
// call goes at once, through the single-call script (deleteScript),
// which costs Redis less for one call. The group script reads the
// records of the whole group with one MGET and the topic's clock (with,
// on one node, the ids' claims) with another, removes them from the
// reserved index with one ZREM, adds them to their ended index with one
// ZADD per state, and writes the topic's clock once: callgrind counts
// 156k Redis instructions per retained finish on one node in groups of 8
// against 229k alone (docs/benchmarks.md).
//
// Each call keeps its own answer: the script checks every call as the
// single-call script would (a finish of a job no longer held by that
// reservation answers NOTRESERVED, one not there NOTFOUND), in the
// order the calls were taken, so a second call on a job the group has
// just ended finds it gone. It loads and checks every call before it
// writes anything, so a record that cannot be read fails the script
// with nothing written, and the group is then written again one call
// per script (deleteScript), where that record fails only its own call.
//
// On one node the scripts also drop or retain the jobs' global entries
// (the id claims, the seq -> topic shards). On a Cluster those are other
// slots' keys, which a topic's script cannot touch: the script does what
// deleteScript does with no key prefix (the retained job's P:{t}:r:<id>
// when its id has a claim), and after the group's scripts its global
// steps, if it has any, go in one pipelined round trip (indexEnded): one
// compare-and-set of each claimed id's claim (an id the server made has
// none: it carries its seq), and, for jobs not retained (--retain 0),
// one HDEL per seq shard for the group's seqs in it. A retained job's
// seq -> topic entry stays in its shard, on a Cluster as on one node:
// the finish writes no key for it and sends nothing to the shard's
// master (before, a script per shard moved each entry to a key of its
// own, P:seqs:{n}:r:<seq>, with the retention as TTL). Its topic's ended
// index then has no TTL, and the sweep trims it with the entries of the
// members it drops (trimEndedCluster, tick.go).

// finishCall is one Delete waiting for its group.
type finishCall struct {
	t     target
	res   string // the reservation ("" for none)
	force bool
	now   string // unix ms
	ref   delayq.Ref

	// The answer, set before the group returns: rec.job is set when the
	// script ended the job, err then only when its replicas did not
	// confirm it (the write stands).
	rec record
	err error
}

// maxFinishGroup bounds the calls of one group of finishes, and the jobs
// of one group of reserves: a script's arguments, its reply, and the
// time Redis spends in it while other clients wait. 32 consumers gather
// about 8 per round trip on two cores.
const maxFinishGroup = 128

// onceLine is a store.Line that the store sets up on its first use.
type onceLine[C any] struct {
	once sync.Once
	line store.Line[C]
}

// get returns the line, set up by setup the first time.
func (o *onceLine[C]) get(setup func(l *store.Line[C])) *store.Line[C] {
	o.once.Do(func() { setup(&o.line) })
	return &o.line
}

// finishLine is the store's line of Delete calls.
func (s *Store) finishLine() *store.Line[*finishCall] {
	return s.finishes.get(func(l *store.Line[*finishCall]) {
		l.Write = s.writeFinishes
		l.Ctx = s.ctx // a gathered group writes for all its callers
		l.MaxJobs = maxFinishGroup
		l.Size = func(*finishCall) (int, int) { return 1, 0 }
	})
}

// writeFinishes writes one group under ctx (a lone call's caller's, a
// gathered group's the store's): one script per topic, in one round
// trip (with --redis-wait-replicas, each followed by WAIT on its
// connection), then on a Cluster the global steps of the jobs ended, in
// another; and answers each call.
func (s *Store) writeFinishes(ctx context.Context, calls []*finishCall) {
	if !s.oneNode {
		defer s.indexEnded(ctx, calls)
	}
	if len(calls) == 1 {
		// The single-call script costs Redis less for one call (about
		// 230k instructions against 260k: the group script's tables
		// and loops).
		calls[0].rec, calls[0].err = s.deleteAlone(ctx, calls[0])
		return
	}
	if err := s.check(); err != nil {
		for _, c := range calls {
			c.err = err
		}
		return
	}
	topics, byTopic := groupByTopic(calls, func(c *finishCall) string { return c.t.topic })
	keep, bodies := s.retentionArgs()
	execs := make([]rueidis.LuaExec, len(topics))
	for i, t := range topics {
		group := byTopic[t]
		args := make([]string, 4, 4+6*len(group))
		copy(args, []string{keep, bodies, s.globalPrefix(), strconv.Itoa(len(group))})
		for _, c := range group {
			force := "0"
			if c.force {
				force = "1"
			}
			args = append(args, c.t.mode, c.t.ref, c.res, force, c.now, nonce())
		}
		execs[i] = rueidis.LuaExec{Keys: s.k.topic(t).slice(), Args: args}
	}
	results, werrs := s.execGroups(ctx, "delete", deleteGroupScript, execs)
	for i, t := range topics {
		group := byTopic[t]
		arr, err := results[i].ToArray()
		if err != nil {
			var re *rueidis.RedisError
			if errors.As(err, &re) {
				// The script failed before it wrote anything (it loads
				// and checks every call first): each call alone.
				s.log.Warn("redisstore: a group of deletes failed; writing each alone", "topic", t, "err", err)
				for _, c := range group {
					c.rec, c.err = s.deleteAlone(ctx, c)
				}
				continue
			}
			for _, c := range group {
				c.err = unavailable("delete", err)
			}
			continue
		}
		if len(arr) != 2*len(group) {
			for _, c := range group {
				c.err = fmt.Errorf("redisstore: delete: %d replies for %d calls", len(arr), len(group))
			}
			continue
		}
		for k, c := range group {
			if c.err = statusErr("delete", c.ref, arr[2*k:2*k+1]); c.err != nil {
				continue
			}
			if c.rec, c.err = decodeJob(arr[2*k+1]); c.err != nil {
				c.err = fmt.Errorf("redisstore: delete: %w", c.err)
				continue
			}
			c.err = werrs[i] // written; its replicas may not have confirmed it
		}
	}
}

// globalPrefix is the key prefix for the scripts that name the global
// keys themselves on one node (onenode.go), "" on a Cluster, where a
// topic's script cannot reach them.
func (s *Store) globalPrefix() string {
	if s.oneNode {
		return s.k.prefix
	}
	return ""
}

// deleteAlone is one call of a group written by the single-call script.
// Its record is returned whenever the script ended the job, with the
// replicas' error when they did not confirm it.
func (s *Store) deleteAlone(ctx context.Context, c *finishCall) (record, error) {
	force := "0"
	if c.force {
		force = "1"
	}
	keep, bodies := s.retentionArgs()
	arr, err := s.exec(ctx, "delete", deleteScript, c.t.topic,
		[]string{c.t.mode, c.t.ref, c.res, force, c.now, keep, bodies, s.globalPrefix(), nonce()})
	if arr == nil {
		return record{}, err
	}
	if err := statusErr("delete", c.ref, arr); err != nil {
		return record{}, err
	}
	if len(arr) < 2 {
		return record{}, fmt.Errorf("redisstore: delete: short reply")
	}
	r, derr := decodeJob(arr[1])
	if derr != nil {
		return record{}, fmt.Errorf("redisstore: delete: %w", derr)
	}
	return r, err
}

// retentionArgs are the retention (ms, "0" keeps nothing) and whether
// bodies are kept ("1"), as the delete scripts take them.
func (s *Store) retentionArgs() (keep, bodies string) {
	bodies = "0"
	if s.opt.Retention.Bodies {
		bodies = "1"
	}
	return strconv.FormatInt(max(s.opt.Retention.For.Milliseconds(), 0), 10), bodies
}

// indexEnded writes, on a Cluster, the global entries of the jobs that
// calls ended, in one pipelined round trip: each claimed id's claim is
// dropped, or for a retained job given the retention as its TTL
// (endClaimScript), and the seq shards' entries of the jobs not retained
// are dropped, one HDEL per shard. A retained job's entry stays in its
// shard until the sweep trims the job from its ended index
// (trimEndedCluster), so a group of retained jobs whose ids the server
// made sends nothing here. A step that fails leaves its entry dangling,
// harmlessly (docs/redis.md); the calls' answers stand. Not under the
// caller's ctx: a client that hangs up now must not cost its jobs their
// entries.
func (s *Store) indexEnded(ctx context.Context, calls []*finishCall) {
	keep := max(s.opt.Retention.For.Milliseconds(), 0)
	ttl := strconv.FormatInt(keep, 10)
	var steps []pipedCall
	shards := map[string][]string{} // shard -> the seqs to drop from it
	var order []string
	for _, c := range calls {
		j := c.rec.job
		if j == nil {
			continue
		}
		claim := "" // dropped
		if keep > 0 {
			// claimed at 0: a retained claim is never a put in progress
			claim = j.Topic + "|0|" + nonce()
		} else {
			sh := s.k.seqShard(j.Seq)
			if _, ok := shards[sh]; !ok {
				order = append(order, sh)
			}
			shards[sh] = append(shards[sh], strconv.FormatUint(j.Seq, 10))
		}
		if c.rec.claim != "" { // an id the server made has none: it carries its seq
			steps = append(steps, pipedCall{script: endClaimScript, keys: []string{s.k.claim(j.ID)}, args: []string{c.rec.claim, claim, ttl}})
		}
	}
	for _, sh := range order {
		steps = append(steps, pipedCall{keys: []string{sh}, cmd: s.c.B().Hdel().Key(sh).Field(shards[sh]...).Build()})
	}
	if len(steps) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	for i, r := range doPiped(ctx, s.c, steps) {
		if err := r.Error(); err != nil {
			s.log.Warn("redisstore: could not index an ended job's id or seq; it dangles", "key", steps[i].keys[0], "err", err)
		}
	}
}

// endClaimScript drops an ended job's id claim, or gives a retained
// job's claim the retention as its TTL and rewrites it as claimed at 0
// (a retained claim is never a put in progress, so a put of the id takes
// it over as soon as the retained job is gone or invisible: takeOver,
// without waiting for staleClaim); only if it is still the claim the job
// was put under.
//
//	KEYS[1] -> the id's claim key
//	ARGV[1] -> the claim expected
//	ARGV[2] -> the retained claim, or "" to drop it
//	ARGV[3] -> the retention (ms)
var endClaimScript = newPipedScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end
return 1
`)

// deleteGroupScript is deleteScript for the calls of one group, all of
// one topic. On one node it names the global keys from the prefix; on a
// Cluster (no prefix) it does what deleteScript does there, and the
// caller writes the global entries after (indexEnded).
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> retention (ms); "0" keeps nothing
//	ARGV[2]    -> "1" to keep the body of a retained job
//	ARGV[3]    -> the key prefix on one node, "" on a Cluster
//	ARGV[4]    -> number of calls n
//	ARGV[5..]  -> per call: mode ("i", "s" or "p"), ref, reservation
//	              ("" for none), force ("1" deletes whatever the state),
//	              now (unix ms), the nonce of a retained claim
//	Returns:   per call its status and the record as it was ("" unless OK)
var deleteGroupScript = newScript(`
local keep, px, prefix, n = ARGV[1] + 0, ARGV[1], ARGV[3], ARGV[4] + 0
local one = prefix ~= ''
-- Every call is found and checked before anything is written, so a
-- record that cannot be read fails the script with nothing done.
local seqs, ids, keys = {}, {}, {}
for i = 1, n do
  local b = 5 + (i - 1) * 6
  seqs[i], ids[i] = locate(ARGV[b], ARGV[b + 1])
  keys[#keys + 1] = K_JOB .. (seqs[i] or 'none')
end
local raws = redis.call('MGET', unpack(keys))
local calls, out, ending = {}, {}, {}
for i = 1, n do
  local b = 5 + (i - 1) * 6
  local seq, j, raw = seqs[i], nil, raws[i]
  -- a job that a call before it in the group ends is gone for it, as
  -- for a call after that one alone
  if seq and not ending[seq] then
    -- not a string: none, or a layout 1 hash (load reads both)
    if raw then j = cmsgpack.unpack(raw) else j, raw = load(seq) end
    if j and (j.ended or (ids[i] and j.id ~= ids[i])) then j = nil end
  end
  local st = 'OK'
  if not j then st = 'NOTFOUND'
  else
    local res = ARGV[b + 2]
    local finished = res ~= '' and held(j, res)
    if ARGV[b + 3] ~= '1' and ((res ~= '' and not finished) or (res == '' and j.state == 'reserved')) then
      st = 'NOTRESERVED'
    else ending[seq] = true end
    calls[i] = {seq = seq, j = j, raw = raw, finished = finished}
  end
  out[2 * i - 1], out[2 * i] = st, ''
end
-- The topic's clock, and on one node the claims, in one MGET (a
-- Cluster's claims are other slots').
local claimKeys = {K_NOW}
for i = 1, n do
  -- a job whose id the server made has no claim (its id carries its seq)
  if one and out[2 * i - 1] == 'OK' and calls[i].j.claim then
    claimKeys[#claimKeys + 1] = prefix .. ':id:{' .. calls[i].j.id .. '}'
    calls[i].ci = #claimKeys
  end
end
local v = redis.call('MGET', unpack(claimKeys))
local lastS = v[1]
local last = lastS and lastS + 0
local moved = false
local reserved, dels, delClaims, shards, shardOrder = {}, {}, {}, {}, {}
local ended, endedOrder, trim = {}, {}, false
for i = 1, n do
  if out[2 * i - 1] == 'OK' then
    local c = calls[i]
    local seq, j = c.seq, c.j
    local claimKey, claimV
    if c.ci then claimKey, claimV = claimKeys[c.ci], v[c.ci] end
    out[2 * i] = c.raw or pack(j)
    if j.state == 'reserved' then reserved[#reserved + 1] = pad(seq) else unplace(seq, j) end
    if j.ix then redis.call('HDEL', K_IDS, j.id) end
    if keep <= 0 then
      dels[#dels + 1] = K_JOB .. seq
      if one then
        if claimKey and claimV == j.claim then delClaims[#delClaims + 1] = claimKey end
        local sh = shardKeys(prefix, seq)
        if not shards[sh] then shards[sh] = {}; shardOrder[#shardOrder + 1] = sh end
        local f = shards[sh]
        f[#f + 1] = seq
      end
    else
      local b = 5 + (i - 1) * 6
      -- the topic's clock, as clockAt: never back, written once below
      local nowS = ARGV[b + 4]
      local nowN = nowS + 0
      if last and last >= nowN then nowS = lastS
      else last, lastS, moved = nowN, nowS, true end
      if c.finished then hend(j, nowS, 'finished', '') else hend(j, nowS, 'deleted', '') end
      if c.finished then j.state = 'finished'
      elseif j.state == 'buried' then j.state = 'failed'
      else j.state = 'deleted' end
      clear(j)
      j.ended = nowS
      local claim = j.claim
      j.claim = nil
      j.ix = nil
      if ARGV[2] ~= '1' then j.body = nil end
      redis.call('SET', K_JOB .. seq, pack(j), 'PX', px)
      local idx = K_ENDED[j.state]
      if not ended[idx] then ended[idx] = {}; endedOrder[#endedOrder + 1] = idx end
      local e = ended[idx]
      e[#e + 1] = nowS
      e[#e + 1] = pad(seq)
      if seq % ` + trimEvery + ` == 0 then trim = true end
      if not one then
        -- the id's claim (another slot) cannot name the seq; an id
        -- without one carries it
        if claim then redis.call('SET', K_RET .. j.id, seq, 'PX', px) end
      elseif claimKey and claimV == claim then
        redis.call('SET', claimKey, j.topic .. '|0|' .. ARGV[b + 5] .. '|' .. seq, 'PX', px)
      end
    end
  end
end
if #reserved > 0 then redis.call('ZREM', K_RESERVED, unpack(reserved)) end
if #dels > 0 then redis.call('DEL', unpack(dels)) end
if #delClaims > 0 then redis.call('DEL', unpack(delClaims)) end
for _, sh in ipairs(shardOrder) do redis.call('HDEL', sh, unpack(shards[sh])) end
for _, idx in ipairs(endedOrder) do
  redis.call('ZADD', idx, unpack(ended[idx]))
  if one then
    if trim then trimEnded(prefix, idx, fmt(last - keep)) end
  elseif trim then
    -- as deleteScript on a Cluster: the seqs' entries stay in their
    -- shards and only the sweep trims the index (trimEndedCluster); a
    -- TTL an earlier build gave it is taken off
    redis.call('PERSIST', idx)
  end
end
if moved then redis.call('SET', K_NOW, lastS) end
return out
`)

// groupByTopic splits a group's calls by topic: the topics in the order
// they first come, and each topic's calls in their order.
func groupByTopic[C any](calls []C, topic func(C) string) ([]string, map[string][]C) {
	var topics []string
	byTopic := map[string][]C{}
	for _, c := range calls {
		t := topic(c)
		if _, ok := byTopic[t]; !ok {
			topics = append(topics, t)
		}
		byTopic[t] = append(byTopic[t], c)
	}
	return topics, byTopic
}

// execGroups runs script once per topic group (execs) and returns each
// run's result, to be read on its own (a topic's script that failed must
// not cost the others their WAIT), and the replicas' answer for each
// (--redis-wait-replicas): non-nil when they did not confirm its writes.
// On one node the scripts share one dedicated connection and one WAIT;
// on a Cluster a dedicated connection is one master's, so each topic's
// script and its WAIT go on their own, side by side.
func (s *Store) execGroups(ctx context.Context, op string, script *rueidis.Lua, execs []rueidis.LuaExec) (results []rueidis.RedisResult, werrs []error) {
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	results, werrs = make([]rueidis.RedisResult, len(execs)), make([]error, len(execs))
	sent := make([]bool, len(execs))
	switch {
	case s.opt.WaitReplicas <= 0:
		results = execMulti(ctx, s.c, script, execs)
		for i := range sent {
			sent[i] = true
		}
	case s.oneNode: // one dedicated connection: one at a time
		werr := s.acked(ctx, op, func(c rueidis.Client) error {
			for i, e := range execs {
				results[i], sent[i] = script.Exec(ctx, c, e.Keys, e.Args), true
			}
			return nil
		})
		for i := range werrs {
			werrs[i] = werr
		}
	default:
		var wg sync.WaitGroup
		for i, e := range execs {
			wg.Go(func() {
				werrs[i] = s.acked(ctx, op, func(c rueidis.Client) error {
					results[i], sent[i] = script.Exec(ctx, c, e.Keys, e.Args), true
					return nil
				})
			})
		}
		wg.Wait()
	}
	if !start.IsZero() {
		s.Committed(start)
	}
	for i, ok := range sent {
		if !ok {
			// No connection to write on (a dedicated one for the WAIT):
			// nothing was sent, and the group answers with why.
			results[i] = rueidis.NewErrorResult(werrs[i])
		}
	}
	return results, werrs
}
