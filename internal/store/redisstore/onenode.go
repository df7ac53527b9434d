package redisstore

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// On one Redis server (standalone, or the master Sentinel names) every
// key lives on the same node, so a transition's script can also write the
// global keys that a Cluster keeps in other slots: a put is one script
// (id claims that name the seq, seq -> topic, topic registry, timer
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

// putOneScript puts jobs of one topic in one step on a one-node Redis.
// The seqs come from this instance's block (seqs.go) and each record
// comes packed whole from Go, so the script only writes and indexes. The
// claim names the seq ("topic|at|nonce|seq"), so the job is found by id
// through its claim: no entry in the topic's K_IDS.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	KEYS[2]    -> P:topics
//	KEYS[3]    -> the topic's timer bucket (P:{b<n>}:due)
//	ARGV[1]    -> number of jobs n
//	ARGV[2]    -> the key prefix
//	ARGV[3]    -> the topic
//	ARGV[4]    -> earliest due of the delayed jobs (unix ms), or ""
//	ARGV[5]    -> the events channel
//	ARGV[6]    -> this instance's id (the events' sender)
//	ARGV[7]    -> "1" when the ids are fresh (PutFresh): no check
//	ARGV[8]    -> "1" to add the topic to P:topics (this instance has not
//	              lately: Store.registered)
//	ARGV[9]    -> how many of the channel's subscribers are this
//	              instance's own ("1" or "0"; see listenedLua)
//	ARGV[10..] -> per job: id, seq, claim, state, pri, due, deadline
//	              (placeArgs), the packed record
//	Returns:   {"OK"} or {"CLAIMED"} when an id is claimed already
//	           (nothing written: the caller takes the full path, which
//	           tells a live job from a stale claim) or {"EXISTS", id, state}
var putOneScript = newScript(listenedLua + `
local n, prefix, topic = tonumber(ARGV[1]), ARGV[2], ARGV[3]
if ARGV[8] == '1' then redis.call('SADD', KEYS[2], topic) end
for i = 0, n - 1 do
  if ARGV[7] == '1' then break end
  local id = ARGV[10 + i * 8]
  if redis.call('EXISTS', prefix .. ':id:{' .. id .. '}') == 1 then return {'CLAIMED'} end
  local seq = redis.call('HGET', K_IDS, id)
  if seq then return {'EXISTS', id, (load(seq) or {}).state or ''} end
end
local ready = 0
for i = 0, n - 1 do
  local b = 10 + i * 8
  local seq = ARGV[b + 1]
  redis.call('SET', prefix .. ':id:{' .. ARGV[b] .. '}', ARGV[b + 2])
  redis.call('HSET', prefix .. ':seqs:{' .. string.format('%d', math.floor(tonumber(seq) / 4096)) .. '}', seq, topic)
  redis.call('SET', K_JOB .. seq, ARGV[b + 7])
  place(seq, {state = ARGV[b + 3], pri = ARGV[b + 4], due = ARGV[b + 5], deadline = ARGV[b + 6]})
  if ARGV[b + 3] == 'ready' then ready = ready + 1 end
end
-- the due is news to the bucket's timer only if it lowered the entry:
-- else that timer steps at the entry, at or before this due, anyway
local lowered = ARGV[4] ~= '' and redis.call('ZADD', KEYS[3], 'LT', 'CH', ARGV[4], topic) == 1
if (lowered or ready > 0) and listened(ARGV[5], ARGV[9]) then
  if lowered then redis.call('PUBLISH', ARGV[5], ARGV[6] .. ' - 0 ' .. ARGV[4]) end
  if ready > 0 then redis.call('PUBLISH', ARGV[5], ARGV[6] .. ' ' .. topic .. ' ' .. ready .. ' 0') end
end
return {'OK'}
`)

// putOne is Put on a one-node Redis for jobs of one topic. ok is false
// when the one step does not apply (some id is claimed: a live job, or a
// claim the full path may take over) and nothing was written. fresh skips
// the check of the ids (PutFresh).
func (s *Store) putOne(ctx context.Context, jobs []*delayq.Job, fresh bool) (ok bool, err error) {
	topic := jobs[0].Topic
	var earliest int64
	for _, j := range jobs {
		if j.Topic != topic {
			return false, nil
		}
		if j.State == delayq.StateDelayed && (earliest == 0 || ms(j.Due) < earliest) {
			earliest = ms(j.Due)
		}
	}
	first, err := s.takeSeqs(ctx, len(jobs))
	if err != nil {
		return true, err
	}
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	args := make([]string, 9, 9+8*len(jobs))
	var buf []byte
	for i, j := range jobs {
		seq := strconv.FormatUint(first+uint64(i), 10)
		claim := topic + "|" + now + "|" + nonce() + "|" + seq
		args = append(args, j.ID, seq, claim)
		args = append(args, placeArgs(j)...)
		buf = appendPacked(buf[:0], append(jobFields(j), "seq", seq, "claim", claim), 0)
		args = append(args, string(buf))
	}
	due := ""
	if earliest != 0 {
		due = strconv.FormatInt(earliest, 10)
	}
	tk := s.k.topic(topic)
	keys := append(tk.slice(), s.k.topics(), s.k.bucketDue(bucketOf(topic, s.opt.Buckets)))
	flag, register := "0", "0"
	if fresh {
		flag = "1"
	}
	asked := time.Now()
	if s.registered.due(topic) {
		register = "1"
	}
	copy(args, []string{strconv.Itoa(len(jobs)), s.k.prefix, topic, due, s.k.events(), s.opt.InstanceID, flag, register, s.fan.own()})
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	var arr []rueidis.RedisMessage
	var serr error
	werr := s.acked(ctx, "put", func(c rueidis.Client) error {
		arr, serr = putOneScript.Exec(ctx, c, keys, args).ToArray()
		return serr
	})
	if serr != nil {
		return true, unavailable("put", serr)
	}
	if register == "1" {
		s.registered.done(topic, asked) // the script's first step ran
	}
	if !start.IsZero() {
		s.Committed(start)
	}
	if len(arr) > 0 {
		if st, _ := arr[0].ToString(); st == "CLAIMED" {
			return false, nil
		}
	}
	if err := statusErr("put", delayq.Ref{}, arr); err != nil {
		return true, err
	}
	for i, j := range jobs {
		j.Seq = first + uint64(i)
		s.topicOf.add(j.Seq, topic)
	}
	return true, werr
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

// PutFresh implements store.FreshPutter. On one node it is the one-script
// put without the check of each id (an EXISTS of its claim and an HGET
// in its topic per job): the engine made the ids just now, so none is
// taken. On a Cluster it skips the id claim script (putFreshCluster);
// on one node for jobs of several topics it is Put.
func (s *Store) PutFresh(ctx context.Context, jobs []*delayq.Job) error {
	if err := s.check(); err != nil {
		return err
	}
	if !s.oneNode && len(jobs) > 0 {
		if err := dupInBatch(jobs); err != nil {
			return err
		}
		return s.putFreshCluster(ctx, jobs)
	}
	if s.oneNode && len(jobs) > 0 {
		if err := dupInBatch(jobs); err != nil {
			return err
		}
		if done, err := s.putOne(ctx, jobs, true); done {
			return err
		}
	}
	return s.Put(ctx, jobs)
}

// listenedLua is the one-node scripts' test of whether a wake-up has
// anyone to wake: PUBLISH costs Redis the command and a write to every
// subscriber, one of which is the publishing instance itself, which
// ignores its own events. With one instance, or while the others'
// subscriptions are down (they step their timers when it is back), a
// one-node put or reserve publishes nothing. PUBSUB NUMSUB counts one
// node's subscribers only, so a Cluster always publishes.
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
