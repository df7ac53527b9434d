package redisstore

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Puts grouped per master on a Cluster.
//
// A Cluster script may touch only keys of its own master, and before
// this a Cluster put was the seq entries' HSET on whichever master
// served their shard and then a script per topic: two round trips to two
// masters for each put, and one script per topic where one node takes a
// group of every topic's puts in one (issue 31). Redis lets a script
// reach keys it did not name when they are on its own node (a script
// without flags may reach any slot its node serves, in Redis 7 as
// before), so a PutFresh call on a Cluster waits in the line of its
// topic's master (by the slot map, slots.go), and a group of such calls,
// of any topics that master holds, goes as ONE masterPutScript: the
// records and indexes of every topic, the test of who waits, and the seq
// entries. The seqs come from the instance's block as every put's do, so
// put order stays seq order within an instance across topics (the
// contract's reserve order), but from key layout 3 on they are the next
// ones whose seq group's shard is on that master (takeSeqsOn, keys.go:
// seqShard), so the script writes their entries too.
//
// What the script cannot write goes in one pipeline before it, as a
// lone put sends it (indexPut): the topics not registered lately, the
// bucket entries lowered to the delayed jobs' dues (each topic's bucket
// may be on another master), and the seq entries whose shard is on
// another master (when no seq group is on this one, or the slot map is
// not read yet); markAgain follows the script as after a lone put. A put
// of ready jobs whose topic is registered is one round trip to one
// master, as on one node (TestClusterFreshPutIsOneRoundTrip). Producers'
// ids (Put) need their claims, one per id slot, so they keep their
// topic's line (clusterput.go).
//
// When a master refuses a key (the slot map was stale: a resharding
// moved a slot), the script stops there: the seq entries go first, then
// the topics one by one, each whole, so every topic before is in whole
// and nothing of the others. The group is then written topic by topic
// as a lone Cluster put is, with the same seqs and records, so what the
// script wrote is written again the same, and the slot map is read
// again (TestClusterMasterPutWithAStaleSlotMap).

// masterPutsInFlight is how many groups of one master's puts an instance
// writes at a time. A group is one script (two round trips at most), so
// one at a time gathers the most: on three masters, 33 producers over 30
// topics, 0.57 scripts per put against 0.76 with two in flight, 5% fewer
// Redis instructions per put (190k against 200k), the put rate and the
// Redis CPU time the same (A/B and `CALLGRIND=1 scripts/bench-redis.sh
// cluster`, docs/benchmarks.md). A topic's line (clusterput.go) keeps two:
// its groups take several round trips.
const masterPutsInFlight = 1

// lineOf is the line of a put of topic: a PutFresh call's master's on a
// Cluster when the slot map names it, else putLineOf's.
func (s *Store) lineOf(topic string, fresh bool) *store.Line[*putCall] {
	if fresh {
		if l := s.masterLineOf(topic); l != nil {
			return l
		}
	}
	return s.putLineOf(topic)
}

// masterLineOf is the line of a PutFresh call of topic on a Cluster: its
// master's, or nil when that is not known (one node, or the slot map not
// read yet).
func (s *Store) masterLineOf(topic string) *store.Line[*putCall] {
	if s.oneNode {
		return nil
	}
	m := s.masterOfKey(s.k.topicBase(topic))
	if m == "" {
		return nil
	}
	return s.puts.lineIn(&s.puts.byMaster, m, func() *store.Line[*putCall] {
		l := new(store.Line[*putCall])
		*l = s.newPutLine()
		l.Write = func(ctx context.Context, calls []*putCall) { s.writeMasterPuts(ctx, m, calls) }
		l.InFlight = masterPutsInFlight
		return l
	})
}

// writeMasterPuts writes a group of PutFresh calls whose topics are on
// master and sets each call's answer.
func (s *Store) writeMasterPuts(ctx context.Context, master string, calls []*putCall) {
	if err := s.check(); err != nil {
		failCalls(calls, err)
		return
	}
	start := time.Now()
	var jobs []*delayq.Job
	for _, c := range calls {
		jobs = append(jobs, c.jobs...)
	}
	seqs, err := s.takeSeqsOn(ctx, len(jobs), master)
	if err != nil {
		failCalls(calls, err)
		return
	}
	for i, j := range jobs {
		j.Seq = seqs[i]
		j.ID = freshID(j.ID, j.Seq) // carries its seq: no claim (freshid.go)
	}
	local, err := s.beforeMasterPut(ctx, master, jobs)
	if err != nil {
		failCalls(calls, err)
		return
	}
	args := []string{s.k.prefix, s.opt.InstanceID}
	var buf []byte
	for _, c := range calls {
		args = append(args, c.jobs[0].Topic, strconv.Itoa(len(c.jobs)))
		for _, j := range c.jobs {
			seq := strconv.FormatUint(j.Seq, 10)
			shard := s.k.seqShard(j.Seq)
			if !local[shard] {
				shard = "" // written before (beforeMasterPut)
			}
			args = append(append(args, seq, shard), placeArgs(j, j.Seq)...)
			buf = appendPacked(buf[:0], append(jobFields(j), "seq", seq), 0)
			args = append(args, string(buf))
		}
	}
	arr, err := s.execKeys(ctx, "put", masterPutScript, []string{s.k.topicBase(jobs[0].Topic)}, args)
	if arr == nil && err != nil {
		if !notLocal(err) {
			failCalls(calls, err) // no answer: the jobs may be in
			return
		}
		s.slotsMoved()
		byTopic := map[string][]*putCall{}
		var order []string
		for _, c := range calls {
			c.claims = make([]string, len(c.jobs)) // none: the ids carry their seqs
			t := c.jobs[0].Topic
			if byTopic[t] == nil {
				order = append(order, t)
			}
			byTopic[t] = append(byTopic[t], c)
		}
		for _, t := range order {
			s.insertClusterCalls(ctx, byTopic[t], start)
		}
		return
	}
	waited := map[string]bool{}
	for _, m := range arr {
		if t, e := m.ToString(); e == nil {
			waited[t] = true
		}
	}
	for _, c := range calls {
		c.err = err // nil, or the replicas did not confirm (--redis-wait-replicas)
		for _, j := range c.jobs {
			s.topicOf.add(j.Seq, j.Topic)
		}
	}
	s.markAgain(ctx, jobs)
	s.publishPut(ctx, jobs, waited)
}

// beforeMasterPut writes, in one pipeline, what a group of puts on
// master needs before its script and the script cannot write: the
// topics due for the registry, each topic's bucket entry lowered to its
// earliest delayed due, and the seq entries whose shards are not on
// master. It returns the shards that are (the script writes theirs).
func (s *Store) beforeMasterPut(ctx context.Context, master string, jobs []*delayq.Job) (local map[string]bool, err error) {
	local = map[string]bool{}
	for _, j := range jobs {
		shard := s.k.seqShard(j.Seq)
		if _, seen := local[shard]; !seen {
			local[shard] = s.masterOfKey(shard) == master // once per shard, not per job
		}
	}
	if err := s.indexPutBut(ctx, jobs, func(shard string) bool { return local[shard] }); err != nil {
		return nil, err
	}
	return local, nil
}

// notLocal tells a script that a master refused because a key it
// reached is not on that master (a stale slot map) from other errors.
func notLocal(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "non local key") || strings.Contains(msg, "do not hash to the same slot") ||
		strings.Contains(msg, "TRYAGAIN")
}

// masterPutScript inserts a group of PutFresh calls, of any topics its
// master holds, with their seq entries (see above). Its writes go topic
// by topic, the seq entries first, so a key the master refuses stops it
// with every topic before in whole and nothing of the others.
//
//	KEYS[1]    -> the first call's topic's key prefix (routes the script)
//	ARGV[1]    -> the key prefix
//	ARGV[2]    -> this instance's id (its own waiting mark does not count)
//	ARGV[3..]  -> per call: topic, number of jobs n; then per job: seq,
//	              its seq shard key ("" when written before), state,
//	              index score and member (placeArgs), packed record
//	Returns:   the topics whose ready jobs went in while another
//	           instance waits on them (their counts are to be published)
var masterPutScript = newScript(waitedLua + `
local prefix, a, cur = ARGV[1], 3, nil
local hsets, topics = {}, {}
while a <= #ARGV do
  local topic, n, first = ARGV[a], tonumber(ARGV[a + 1]), a + 2
  a = first + n * 6
  local t = topics[topic]
  if not t then
    t = {mset = {}, zadds = {}, ready = false}
    topics[topic], topics[#topics + 1] = t, topic
  end
  if topic ~= cur then
    local b = prefix .. ':{' .. topic .. '}:'
    ` + putTopicLua + `
    cur = topic
  end
  for i = 0, n - 1 do
    local j = first + i * 6
    local seq, shard, state = ARGV[j], ARGV[j + 1], ARGV[j + 2]
    if shard ~= '' then gather(hsets, shard, seq, topic) end
    t.mset[#t.mset + 1] = K_JOB .. seq
    t.mset[#t.mset + 1] = ARGV[j + 5]
    gatherPlace(t.zadds, state, ARGV[j + 3], ARGV[j + 4])
    if state == 'ready' then t.ready = true end
  end
end
for _, key in ipairs(hsets) do callIn('HSET', key, hsets[key]) end
local out = {}
for _, topic in ipairs(topics) do
  local t = topics[topic]
  callIn('MSET', nil, t.mset)
  for _, key in ipairs(t.zadds) do callIn('ZADD', key, t.zadds[key]) end
  if t.ready and waited(prefix .. ':{' .. topic .. '}:waiting', ARGV[2]) then out[#out + 1] = topic end
end
return out
`)
