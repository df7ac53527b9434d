package redisstore

import (
	"hash/crc32"
	"strconv"
	"strings"
	"time"
)

// Every Redis key delayq uses is built in this file, so that the Cluster
// rule "all keys of one script share a hash tag" is checked in one place.
//
// Keys of a topic share the hash tag {topic}, so every per-topic script runs
// on one Cluster slot:
//
//	P:{t}:j:<seq>    STRING one job record, a MessagePack map (job.go, packed.go; layout 1: a HASH)
//	P:{t}:ids        HASH   job id -> seq (live jobs of producers' ids put on a Cluster or by the multi-step put)
//	P:{t}:ready      ZSET   score 0, member %010d(priority) . %020d(seq): lexical order = serving order
//	P:{t}:age        ZSET   ready jobs by due (oldest ready, for Topics)
//	P:{t}:delayed    ZSET   by due, member %020d(seq)
//	P:{t}:reserved   ZSET   by deadline
//	P:{t}:buried     ZSET   by the time buried
//	P:{t}:pause      STRING pause end, unix ms
//	P:{t}:now        STRING the latest Now the topic was acted at (Now never goes back)
//	P:{t}:marked     STRING on a Cluster, a time (unix ms) the topic's entry in P:{b<n>}:due is at or
//	                        below once the marks in flight land (reserve.go: markedLua); PX markedFor
//	P:{t}:waiting    ZSET   instance id -> end of its mark, Redis TIME in ms: that instance has
//	                        long-poll waiters on t (MarkWaiting, notify.go); PEXPIREd with the latest
//	P:{t}:s:<step>:<start> HASH six chart series buckets from start, fields <i><f> (series.go); PEXPIREAT the last one's start+Keep
//	P:{t}:r:<id>     STRING seq of the retained job with that producer's id (Cluster only); PEXPIRE = the retention
//	P:{t}:finished   ZSET   retained finished jobs by Ended, member %020d(seq); no TTL; trimmed to the
//	P:{t}:deleted    ZSET   retention window, with the trimmed members' seq entries, by the sweep and
//	P:{t}:failed     ZSET   on one node also on one write in 16 (on a Cluster only the sweep reaches the shards)
//
// A retained job (Options.Retention) keeps its record P:{t}:j:<seq>, with
// the retention as its TTL, so Redis removes it by itself: no scan.
//
// Global keys, each in its own slot, written outside the topic scripts
// (docs/redis.md explains why a dangling entry is harmless):
//
//	P:id:{<id>}      STRING claim of a producer's job id: "topic|claimed-at-ms|nonce", "|seq" appended
//	                        when a one-node script wrote it (the job is then found through it);
//	                        an id the server made has none: it carries its seq (freshid.go)
//	P:seqs:{s<g>}:<n> HASH  seq -> topic on a Cluster, for seqs from the deployment's seqtags on
//	                        (seqs.go): the seqs of n*2^18 .. (n+1)*2^18-1 whose run of 8 is in
//	                        group g = seq/8 mod 64 (a retained job's field stays until its ended
//	                        index's trim drops it)
//	P:seqs:{<n>}     HASH   seq -> topic, for seqs n*4096 .. n*4096+4095: every seq on one node,
//	                        and on a Cluster those below seqtags (written by format 2 and before)
//	P:seqs:{<n>}:r:<seq> STRING topic of a retained job that a Cluster instance of an earlier build
//	                        ended (its HASH field moved here); PEXPIRE = the retention; still read
//	P:seq            STRING end of the last block of seqs handed out (seqScript: never below Redis TIME in µs; seqs.go)
//	P:meta           HASH   buckets, format, seqtags (Cluster only): the deployment's settings, written
//	                        by its first instance (meta.go)
//	P:topics         SET    every topic ever used
//	P:{b<n>}:due     ZSET   topics of timer bucket n with pending work, by earliest due/deadline
//	P:{b<n>}:lease   STRING instance id holding bucket n (SET NX PX)
//	P:instances      ZSET   instance id -> heartbeat expiry (unix ms)
//	P:instance:{<i>} HASH   url, protocols, since
//	P:events         pub/sub channel of wake-ups between instances
//	P:{doc}:<kind>:d:<n>  HASH  document n of kind (schedule, policy, alarm): rev, data; docs.go
//	P:{doc}:<kind>:names SET  every name of that kind (same slot, so one script sees both)
type keys struct {
	prefix string
	// tagged is set on a Cluster: the seqs from tagsFrom on have their
	// entries in the shard of their seq group (seqShard).
	tagged   bool
	tagsFrom uint64
}

// topicKeys are the keys of one topic. A topic script receives one key,
// the topic's prefix P:{t}: (slice), and names the keys it uses from it
// (prelude in job.go): Redis copies every key and argument of a call
// into the script's KEYS and ARGV, about as dear as a short command
// inside it, so 13 keys per call, most of them unused, cost each
// transition more than naming the few it uses (issue 31). The keys share
// the hash tag {t}, so on a Cluster they are in the slot of the key
// declared.
type topicKeys [13]string

// topic returns the keys of topic t. The first is the prefix of the job
// records; scripts append the seq (same hash tag, so the same slot).
func (k keys) topic(t string) topicKeys {
	b := k.topicBase(t)
	return topicKeys{b + "j:", b + "ids", b + "ready", b + "age", b + "delayed", b + "reserved", b + "buried", b + "pause", b + "now",
		b + "r:", b + "finished", b + "deleted", b + "failed"}
}

// topicBase is topic t's key prefix P:{t}:, which a topic script
// receives as KEYS[1] (slice) and which routes it to t's slot.
func (k keys) topicBase(t string) string { return k.prefix + ":{" + t + "}:" }

// slice is what a topic script receives as KEYS: the topic's prefix
// (KEYS[1]); a one-node script's global keys follow from KEYS[2].
func (tk topicKeys) slice() []string { return []string{strings.TrimSuffix(tk[0], "j:")} }

// idsKey is the topic's id -> seq hash.
func (tk topicKeys) idsKey() string { return tk[1] }

// readyKey is the topic's ready index.
func (tk topicKeys) readyKey() string { return tk[2] }

// nowKey is the topic's clock: the latest now it was acted at.
func (tk topicKeys) nowKey() string { return tk[8] }

// pauseKey is the topic's pause key.
func (tk topicKeys) pauseKey() string { return tk[7] }

func (k keys) claim(id string) string { return k.prefix + ":id:{" + id + "}" }

// seqShardSize is how many seqs share one seq -> topic hash (on one
// node, and below seqtags on a Cluster).
const seqShardSize = 4096

// seqGroupShardSize is how many seqs share the hashes of the seq groups
// (one hash per group): the seq counter follows the clock in µs, so
// that is 262 ms of puts. A range as small as seqShardSize would hold a
// group's hash to a job or two at a few thousand puts a second (the
// instances' blocks of 1,024 seqs, each a few dozen puts, spread over
// 64 groups): 27,000 more keys for 60,000 jobs and 8% more Redis
// memory per job on three masters (scripts/bench-redis-ab.sh memory).
const seqGroupShardSize = 1 << 18

// seqRun is how many consecutive seqs are in one seq group, and
// seqGroups how many groups there are: seq/seqRun mod seqGroups. A group
// is a hash tag of its own ({s<g>}), so on a Cluster an instance can
// give a put a seq whose entry is on the put's topic's master
// (takeSeqsOn); a run of 8 lets a group of puts of one master share
// one entry hash, and 64 groups leave every master of up to dozens some.
const (
	seqRun    = 8
	seqGroups = 64
)

// seqGroup is the seq group of seq.
func seqGroup(seq uint64) int { return int(seq / seqRun % seqGroups) }

// seqGroupTag is the hash tag of seq group g, whose slot decides its
// master.
func seqGroupTag(g int) string { return "s" + strconv.Itoa(g) }

// inGroups tells whether seq's entry is in the hash of its seq group
// (a Cluster's seqs from seqtags on) rather than its untagged shard.
func (k keys) inGroups(seq uint64) bool { return k.tagged && seq >= k.tagsFrom }

// seqShard is the seq -> topic hash that holds seq's entry.
func (k keys) seqShard(seq uint64) string {
	if k.inGroups(seq) {
		return k.prefix + ":seqs:{" + seqGroupTag(seqGroup(seq)) + "}:" + strconv.FormatUint(seq/seqGroupShardSize, 10)
	}
	return k.untaggedShard(seq)
}

// untaggedShard is the seq -> topic hash of seq in format 2 and before,
// and on one node.
func (k keys) untaggedShard(seq uint64) string {
	return k.prefix + ":seqs:{" + strconv.FormatUint(seq/seqShardSize, 10) + "}"
}

// retainedSeq is the key naming the topic of a retained job by its seq
// (same slot as the seq's untagged shard), as a Cluster instance of an
// earlier build wrote it; this build only reads it (seqTopic).
func (k keys) retainedSeq(seq uint64) string {
	return k.untaggedShard(seq) + ":r:" + strconv.FormatUint(seq, 10)
}

func (k keys) seqCounter() string { return k.prefix + ":seq" }
func (k keys) topics() string     { return k.prefix + ":topics" }
func (k keys) meta() string       { return k.prefix + ":meta" }

func (k keys) bucketDue(b int) string {
	return k.prefix + ":{b" + strconv.Itoa(b) + "}:due"
}

func (k keys) lease(b int) string {
	return k.prefix + ":{b" + strconv.Itoa(b) + "}:lease"
}

func (k keys) instances() string { return k.prefix + ":instances" }

func (k keys) instance(id string) string { return k.prefix + ":instance:{" + id + "}" }

func (k keys) events() string { return k.prefix + ":events" }

// markedLua names P:{t}:marked in a topic script (K_MARKED; reserve.go
// says what it holds). It is not one of topicKeys: only the Cluster
// reserve scripts and the tick's refresh use it.
const markedLua = `
local K_MARKED = K_B .. 'marked'
`

// marked is topic t's P:{t}:marked (markedLua).
func (k keys) marked(t string) string { return k.prefix + ":{" + t + "}:marked" }

// waiting is topic t's marks of the instances with long-poll waiters on
// it (notify.go); same hash tag as the topic's other keys, so the put and
// tick scripts of t can read it.
func (k keys) waiting(t string) string { return k.prefix + ":{" + t + "}:waiting" }

// bucketOf is the timer bucket of topic: which instance's timer promotes
// its due work.
func bucketOf(topic string, buckets int) int {
	return int(crc32.ChecksumIEEE([]byte(topic)) % uint32(buckets))
}

// doc and docNames share the hash tag {doc}, so a document's scripts
// touch one Cluster slot. A kind is a fixed word (store.Kind*) and names
// end the key, so no two (kind, name) pairs share a key.
func (k keys) doc(kind, name string) string { return k.prefix + ":{doc}:" + kind + ":d:" + name }
func (k keys) docNames(kind string) string  { return k.prefix + ":{doc}:" + kind + ":names" }

// series is the key of topic t's chart series group of step starting at
// start (Unix seconds; seriesGroupStart); same hash tag as the topic's
// other keys.
func (k keys) series(t string, step time.Duration, start int64) string {
	return k.prefix + ":{" + t + "}:s:" + strconv.FormatInt(int64(step/time.Second), 10) + ":" + strconv.FormatInt(start, 10)
}
