package redisstore

import (
	"context"
	"fmt"
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
// (id claims, seqs, seq -> topic, topic registry, timer bucket, the
// insert and the wake-up), a reserve marks its bucket in its own script,
// and a delete drops or retains its global entries in its own. Each is
// then one atomic step instead of three to five round trips (issue 31:
// Redis spent 126 µs of CPU per put and 291 µs per reserve+delete on the
// steps; docs/benchmarks.md). The keys and values are those of keys.go
// either way, so a store written through one path is read through the
// other, and a Cluster keeps the multi-step path (docs/redis.md).
//
// The global keys such a script writes are named inside it from the key
// prefix (a seq's shard key depends on the seq the script hands out), which
// Redis allows outside Cluster mode only; the Cluster path never does it.

// putOneScript puts jobs of one topic in one step on a one-node Redis.
//
//	KEYS[1..13] -> the topic's keys
//	KEYS[14]   -> P:seq
//	KEYS[15]   -> P:topics
//	KEYS[16]   -> the topic's timer bucket (P:{b<n>}:due)
//	ARGV[1]    -> number of jobs n
//	ARGV[2]    -> number of field/value pairs per job f (jobFields, without seq)
//	ARGV[3]    -> the key prefix
//	ARGV[4]    -> the topic
//	ARGV[5]    -> earliest due of the delayed jobs (unix ms), or ""
//	ARGV[6]    -> the events channel
//	ARGV[7]    -> this instance's id (the events' sender)
//	ARGV[8]    -> "1" when the ids are fresh (PutFresh): no check
//	ARGV[9..]  -> per job: id, claim, then f pairs
//	Returns:   {"OK", last seq} or {"CLAIMED"} when an id is claimed
//	           already (nothing written: the caller takes the full path,
//	           which tells a live job from a stale claim) or
//	           {"EXISTS", id, state}
var putOneScript = newScript(`
local n, f, prefix, topic = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local stride = 2 + 2 * f
for i = 0, n - 1 do
  if ARGV[8] == '1' then break end
  local id = ARGV[9 + i * stride]
  if redis.call('EXISTS', prefix .. ':id:{' .. id .. '}') == 1 then return {'CLAIMED'} end
  local seq = redis.call('HGET', K_IDS, id)
  if seq then return {'EXISTS', id, redis.call('HGET', K_JOB .. seq, 'state') or ''} end
end
local t = redis.call('TIME')
local cur = tonumber(redis.call('GET', KEYS[14]) or '0')
local clk = tonumber(t[1]) * 1000000 + tonumber(t[2])
if cur < clk then cur = clk end
redis.call('SET', KEYS[14], string.format('%d', cur + n))
local ready = 0
for i = 0, n - 1 do
  local base = 9 + i * stride
  local id, seq = ARGV[base], string.format('%d', cur + 1 + i)
  redis.call('SET', prefix .. ':id:{' .. id .. '}', ARGV[base + 1])
  redis.call('HSET', prefix .. ':seqs:{' .. string.format('%d', math.floor((cur + 1 + i) / 4096)) .. '}', seq, topic)
  local j = {}
  local args = {'seq', seq}
  for p = base + 2, base + 1 + 2 * f, 2 do
    j[ARGV[p]] = ARGV[p + 1]
    args[#args + 1] = ARGV[p]
    args[#args + 1] = ARGV[p + 1]
  end
  redis.call('HSET', K_JOB .. seq, unpack(args))
  redis.call('HSET', K_IDS, id, seq)
  place(seq, j)
  if j.state == 'ready' then ready = ready + 1 end
end
redis.call('SADD', KEYS[15], topic)
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[16], 'LT', ARGV[5], topic)
  redis.call('PUBLISH', ARGV[6], ARGV[7] .. ' - 0 ' .. ARGV[5])
end
if ready > 0 then redis.call('PUBLISH', ARGV[6], ARGV[7] .. ' ' .. topic .. ' ' .. ready .. ' 0') end
return {'OK', string.format('%d', cur + n)}
`)

// putOne is Put on a one-node Redis for jobs of one topic. ok is false
// when the one step does not apply (some id is claimed: a live job, or a
// claim the full path may take over) and nothing was written. fresh skips
// the check of the ids (PutFresh).
func (s *Store) putOne(ctx context.Context, jobs []*delayq.Job, fresh bool) (ok bool, err error) {
	topic := jobs[0].Topic
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	var earliest int64
	var args []string
	f := 0
	for _, j := range jobs {
		if j.Topic != topic {
			return false, nil
		}
		if j.State == delayq.StateDelayed && (earliest == 0 || ms(j.Due) < earliest) {
			earliest = ms(j.Due)
		}
		claim := topic + "|" + now + "|" + nonce()
		kv := jobFields(j, claim)
		kv = append(kv[:2:2], kv[4:]...) // without the seq pair: the script hands seqs out
		if f != 0 && f != len(kv)/2 {
			return false, nil // one stride for all jobs
		}
		f = len(kv) / 2
		args = append(args, j.ID, claim)
		args = append(args, kv...)
	}
	due := ""
	if earliest != 0 {
		due = strconv.FormatInt(earliest, 10)
	}
	tk := s.k.topic(topic)
	keys := append(tk.slice(), s.k.seqCounter(), s.k.topics(), s.k.bucketDue(bucketOf(topic, s.opt.Buckets)))
	flag := "0"
	if fresh {
		flag = "1"
	}
	args = append([]string{strconv.Itoa(len(jobs)), strconv.Itoa(f), s.k.prefix, topic, due, s.k.events(), s.opt.InstanceID, flag}, args...)
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
	if len(arr) < 2 {
		return true, fmt.Errorf("redisstore: put: short reply")
	}
	last, err := arr[1].AsInt64()
	if err != nil {
		return true, fmt.Errorf("redisstore: put: bad seq: %w", err)
	}
	for i, j := range jobs {
		j.Seq = uint64(last) - uint64(len(jobs)) + uint64(i) + 1
		s.topicOf.add(j.Seq, topic)
	}
	return true, werr
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
// taken. On a Cluster, and for jobs of several topics, it is Put.
func (s *Store) PutFresh(ctx context.Context, jobs []*delayq.Job) error {
	if err := s.check(); err != nil {
		return err
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
