package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// On one Redis server (standalone, or the master Sentinel names) every
// key lives on the same node, so a transition's script can also write the
// global keys that a Cluster keeps in other slots: a put is one script
// (id claims that name the seq, none for ids the server made, seq -> topic, topic registry, timer
// bucket, the insert and the wake-up; the seqs come from the instance's
// block, seqs.go), a reserve marks its bucket and publishes its deadline
// in its own script, and a delete drops or retains its global entries in
// its own. Each is then one atomic step instead of three to five round
// trips (issue 31: Redis spent 126 µs of CPU per put and 291 µs per
// reserve+delete on the steps; docs/benchmarks.md). The keys are those of
// keys.go either way, and both paths read what the other writes (a claim
// that names the seq, or an entry in the topic's ids hash), so a store
// written through one path is read through the other, and a Cluster keeps
// the multi-step path (docs/redis.md).
//
// The global keys such a script writes are named inside it from the key
// prefix (a seq's shard key depends on the job's seq), which Redis allows
// outside Cluster mode only; the Cluster path never does it.

// putOneScript puts a group of calls (putLine) in one step on a
// one-node Redis, each call's jobs of one topic. The seqs come from this
// instance's block (seqs.go) and each record comes packed whole from Go,
// so the script only checks, writes and indexes. A producer's id gets a
// claim that names the seq ("topic|at|nonce|seq"), so the job is found
// by id through its claim: no entry in the topic's K_IDS. An id the
// server made (PutFresh) carries its seq and gets no claim (freshid.go). Each call is all or nothing and gets its
// own answer: a call with an id taken writes none of its jobs and leaves
// the others' alone. The wake-ups of the whole group go after its
// inserts: a topic's ready count only when another instance has marked
// it as waited on (waited), the earliest due it lowered only when another
// instance listens (listened).
// KEYS[1] names the first call's topic, so a group of one topic (a lone
// put above all) names its keys once, as the prelude does; a call of
// another topic points the keys at its own (putTopicLua).
//
//	KEYS[1]    -> the first call's topic's key prefix (keys.go)
//	KEYS[2]    -> P:topics
//	ARGV[1]    -> the key prefix
//	ARGV[2]    -> the events channel
//	ARGV[3]    -> this instance's id (the events' sender)
//	ARGV[4]    -> how many of the channel's subscribers are this
//	              instance's own ("1" or "0"; see listenedLua)
//	ARGV[5..]  -> per call: topic, number of jobs n, flags (bit 1: the
//	              ids are fresh, PutFresh: no check; bit 2: add the topic
//	              to P:topics, which this instance has not done lately:
//	              Store.registered), the topic's timer bucket
//	              (P:{b<n>}:due), the earliest due of its delayed jobs
//	              (unix ms) or ""; then per job: id, seq, claim ("" for
//	              an id the server made: none), state, its index score
//	              and member and its seq shard key (placeArgs), the
//	              packed record, and the seq a producer's id carries
//	              (freshSeq; else ""), whose job must not have that id
//	              (madeHereLua)
//	Returns:   per call, in order: "OK"; "CLAIMED" when an id is
//	           claimed already (nothing of the call written: it takes
//	           the full path, which tells a live job from a stale claim);
//	           or "EXISTS" followed by the live id and its state
var putOneScript = newScript(listenedLua + madeHereLua + waitedLua + `
local prefix, out, ready, lowered = ARGV[1], {}, {}, nil
local a, cur = 5, ARGV[5]
-- Every write of the group is gathered and sent as one variadic command
-- per key (callIn): an MSET of all claims and records, an HSET per seq
-- shard, a ZADD per index. Per job and per key the commands were a
-- third of a put.
local mset, hsets, zadds = {}, {}, {}
while a <= #ARGV do
  local topic, n, fl = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  local bucket, due, first = ARGV[a + 3], ARGV[a + 4], a + 5
  if fl == '2' or fl == '3' then redis.call('SADD', KEYS[2], topic) end
  a = first + n * 9
  if topic ~= cur then
    local b = prefix .. ':{' .. topic .. '}:'
    ` + putTopicLua + `
    cur = topic
  end
  local st, sid, sstate = 'OK', nil, nil
  for i = 0, n - 1 do
    if fl == '1' or fl == '3' then break end
    local id, chk = ARGV[first + i * 9], ARGV[first + i * 9 + 8]
    if redis.call('EXISTS', prefix .. ':id:{' .. id .. '}') == 1 then st = 'CLAIMED'; break end
    local seq = redis.call('HGET', K_IDS, id)
    if seq then st, sid, sstate = 'EXISTS', id, (load(seq) or {}).state or ''; break end
    if chk ~= '' then
      -- an id that carries a seq (freshid.go): is it that job's?
      st, sid, sstate = madeHere(prefix, chk, id)
      if st ~= 'OK' then break end
    end
  end
  if st == 'OK' then
    local r = 0
    for i = 0, n - 1 do
      local b = first + i * 9
      local seq, state, score, m = ARGV[b + 1], ARGV[b + 3], ARGV[b + 4], ARGV[b + 5]
      if ARGV[b + 2] ~= '' then
        mset[#mset + 1] = prefix .. ':id:{' .. ARGV[b] .. '}'
        mset[#mset + 1] = ARGV[b + 2]
      end
      mset[#mset + 1] = K_JOB .. seq
      mset[#mset + 1] = ARGV[b + 7]
      gather(hsets, ARGV[b + 6], seq, topic)
      gatherPlace(zadds, state, score, m)
      if state == 'ready' then r = r + 1 end
    end
    if r > 0 then
      if not ready[topic] then ready[#ready + 1] = topic; ready[topic] = 0 end
      ready[topic] = ready[topic] + r
    end
    -- the due is news to the bucket's timer only if it lowered the entry:
    -- else that timer steps at the entry, at or before this due, anyway
    if due ~= '' and redis.call('ZADD', bucket, 'LT', 'CH', due, topic) == 1 then
      if not lowered or tonumber(due) < tonumber(lowered) then lowered = due end
    end
  end
  out[#out + 1] = st
  if sid then out[#out + 1] = sid; out[#out + 1] = sstate end
end
callIn('MSET', nil, mset)
for _, key in ipairs(hsets) do callIn('HSET', key, hsets[key]) end
for _, key in ipairs(zadds) do callIn('ZADD', key, zadds[key]) end
if lowered and listened(ARGV[2], ARGV[4]) then redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' - 0 ' .. lowered) end
for _, t in ipairs(ready) do
  if waited(prefix .. ':{' .. t .. '}:waiting', ARGV[3]) then
    redis.call('PUBLISH', ARGV[2], ARGV[3] .. ' ' .. t .. ' ' .. ready[t] .. ' 0')
  end
end
return out
`)

// putTopicLua points the prelude's keys that a put uses at the topic
// whose key prefix is b (P:{t}:), inline: no closure for a lone put to
// make. It is written from keys.topic, as useTopicLua is, so the names
// cannot drift apart; it sets only the seven keys a put names (useTopic
// sets all thirteen).
var putTopicLua = func() string {
	tk := keys{}.topic("")
	var names, values []string
	for i, name := range []string{"K_JOB", "K_IDS", "K_READY", "K_AGE", "K_DELAYED", "K_RESERVED", "K_BURIED"} {
		names = append(names, name)
		values = append(values, "b .. '"+strings.TrimPrefix(tk[i], ":{}:")+"'")
	}
	return strings.Join(names, ", ") + " = " + strings.Join(values, ", ")
}()

// putInLine is Put of jobs of one topic through the instance's put line
// (putLine): the calls that arrive while one group is in flight are
// written together, on one node as one script call, on a Cluster step by
// step for the whole group (clusterput.go). ok is false when the line
// does not apply (the jobs are of several topics, or on one node some id
// is claimed: a live job, or a claim the full path may take over) and
// nothing was written. fresh skips the check of the ids (PutFresh).
func (s *Store) putInLine(ctx context.Context, jobs []*delayq.Job, fresh bool) (ok bool, err error) {
	c := &putCall{jobs: jobs, fresh: fresh}
	for _, j := range jobs {
		if j.Topic != jobs[0].Topic {
			return false, nil
		}
		c.body += len(j.Body)
	}
	if err := s.lineOf(jobs[0].Topic, fresh).Do(ctx, c); err != nil {
		return true, fmt.Errorf("redisstore: put: %w", err)
	}
	if c.claimed {
		return false, nil
	}
	return true, c.err
}

// registeredTopics remembers when this instance last added each topic to
// P:topics, so a put adds it once a minute, not once per put (the
// registry never forgets a topic; the minute only bounds how long a
// registry lost with its Redis data stays incomplete).
type registeredTopics struct {
	mu sync.Mutex
	m  map[string]time.Time
}

// registerEvery is how often a put adds its topic to P:topics again.
const registerEvery = time.Minute

// due reports whether a put of topic must add it to the registry: no
// put of this instance that did has answered within registerEvery.
func (r *registeredTopics) due(topic string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, ok := r.m[topic]
	return !ok || time.Since(at) >= registerEvery
}

// done records that a script which added topic to the registry ran.
func (r *registeredTopics) done(topic string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil || len(r.m) >= seqTopicsMax {
		r.m = make(map[string]time.Time)
	}
	r.m[topic] = at
}

// seqTopics remembers the topic of the seqs this instance put or
// reserved, so a beanstalkd delete, release or bury by seq skips the
// lookup of its topic: a job's topic never changes, so an entry is never
// wrong, and a seq it misses is looked up as before. It holds at most
// seqTopicsMax entries and starts over when full.
type seqTopics struct {
	mu sync.Mutex
	m  map[uint64]string
}

// seqTopicsMax bounds the cache: about 64 B an entry, 4 MiB in all.
const seqTopicsMax = 1 << 16

func (c *seqTopics) add(seq uint64, topic string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= seqTopicsMax {
		c.m = make(map[uint64]string)
	}
	c.m[seq] = topic
}

func (c *seqTopics) get(seq uint64) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[seq]
	return t, ok
}

var _ store.FreshPutter = (*Store)(nil)

// PutFresh implements store.FreshPutter. It replaces each job's id with
// one that carries its seq (freshid.go), which needs no id claim: on one
// node it is the one-script put without the claims and without the check
// of each id (an EXISTS of its claim and an HGET in its topic per job):
// the engine made the ids just now, so none is taken. On a Cluster the
// jobs of a topic go in a group of the topic's puts (clusterput.go)
// without the id claim scripts; jobs of several topics, on a Cluster or
// on one node, go through putFreshSteps.
func (s *Store) PutFresh(ctx context.Context, jobs []*delayq.Job) error {
	if done, err := s.putFirst(ctx, jobs, true); done {
		return err
	}
	return s.putFreshSteps(ctx, jobs)
}

// madeHereLua is the one-node put script's check of an id that carries
// a seq (freshid.go; Go passes the seq): madeHere(prefix, seq, id)
// answers "OK" when no job seq has that id, "EXISTS", id and its state
// when it is live, and "CLAIMED" when it is retained or a layout 1
// record (the full path then asks the topic, which knows whether it is
// still within the retention window: heldBySeq).
const madeHereLua = `
local function madeHere(prefix, seq, id)
  local t = redis.call('HGET', (shardKeys(prefix, seq)), seq)
  if not t then return 'OK' end
  local raw = redis.pcall('GET', prefix .. ':{' .. t .. '}:j:' .. seq)
  if not raw then return 'OK' end
  if type(raw) == 'table' then return 'CLAIMED' end
  local j = cmsgpack.unpack(raw)
  if j.id ~= id then return 'OK' end
  if j.ended then return 'CLAIMED' end
  return 'EXISTS', id, j.state
end
`

// listenedLua is the one-node scripts' test of whether a due time or
// deadline has anyone to tell (ready counts have their own, waitedLua):
// PUBLISH costs Redis the command and a write to every
// subscriber, one of which is the publishing instance itself, which
// ignores its own events. With one instance, or while the others'
// subscriptions are down (they step their timers when it is back), a
// one-node put or reserve publishes nothing. PUBSUB NUMSUB counts one
// node's subscribers only, so on a Cluster a script cannot tell; there a
// reserve asks the channel's shard from Go after its script (heard).
//
// own is how many of the subscribers are this instance (fanout.own):
// "1" while Redis has confirmed its subscription. A subscription that
// ends before the instance hears of it makes this count one too many
// for that moment; as when an event is lost while an instance
// reconnects, that costs latency, never a job.
const listenedLua = `
local function listened(ch, own)
  return redis.call('PUBSUB', 'NUMSUB', ch)[2] > tonumber(own)
end
`
