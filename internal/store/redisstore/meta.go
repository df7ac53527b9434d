package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/redis/rueidis"
)

// MaxBuckets bounds Options.Buckets: each bucket is a lease every instance
// renews each round, and more buckets than instances times a few buys
// nothing.
const MaxBuckets = 1024

// maxPrefix bounds Options.Prefix, which starts every key.
const maxPrefix = 64

// layoutFormat names the key layout and seq scheme of this version. It is
// written into a deployment's meta key by its first instance, and an
// instance of another format refuses to join, so two versions that lay
// keys out differently never share a prefix. Format 2 (issue 31) keeps
// a job record as one packed string (packed.go) and, on one node, names
// the seq in the id's claim; it reads everything format 1 wrote (a
// record hash is read as it is and written as a string on its next
// change). Format 3 (issue 31) puts, on a Cluster, the seq -> topic
// entries of the seqs from the deployment's seqtags on in the hash of
// their seq group (keys.go: seqShard), whose master the instance chose;
// the seqs below stay where format 2 put them and are read there. On
// one node format 3 writes what format 2 wrote. So the first format 3
// instance upgrades a format 1 or 2 deployment in place (metaScript):
// no key is rewritten at start.
const layoutFormat = "3"

// upgradableFormats are the older layouts a format 3 instance reads and
// upgrades the deployment's meta key from. An instance of such a version
// still running would not read the new records: stop every one before
// the first instance of this version starts (docs/redis.md).
var upgradableFormats = [2]string{"1", "2"}

// CheckPrefix reports whether p can start every key of a deployment:
// 1 to 64 letters, digits, '_', '-' or '.'. Without ':' no prefix is the
// start of another deployment's key (every key is prefix + ":" + ...), so
// two deployments under different prefixes never meet; without '{' and
// '}' every key keeps the Cluster hash tag keys.go gives it.
func CheckPrefix(p string) error {
	if p == "" || len(p) > maxPrefix {
		return fmt.Errorf("key prefix %q must be 1 to %d characters", p, maxPrefix)
	}
	for _, r := range p {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return fmt.Errorf("key prefix %q may hold only letters, digits, '_', '-' and '.' (not %q)", p, r)
		}
	}
	return nil
}

// metaScript records a deployment's settings the first time an instance
// opens it, and returns what is recorded, so a later instance compares
// its own against the deployment's in one atomic step. A deployment of
// an upgradable format with the same bucket count is moved to this
// instance's format in the same step, so of several instances starting
// together exactly one upgrades it. A Cluster instance offers the first
// seq of the tagged seq shards (seqtags), which only the first such
// instance of a deployment of this format records.
//
//	KEYS[1] -> P:meta
//	ARGV[1] -> buckets
//	ARGV[2] -> layout format
//	ARGV[3], ARGV[4] -> the formats this one upgrades from
//	ARGV[5] -> the seqtags offered, "" on one node
//	Returns: {buckets, format, the format this call upgraded from or "",
//	          seqtags or ""}
var metaScript = rueidis.NewLuaScript(`
redis.call('HSETNX', KEYS[1], 'buckets', ARGV[1])
redis.call('HSETNX', KEYS[1], 'format', ARGV[2])
local got = redis.call('HMGET', KEYS[1], 'buckets', 'format')
local from = ''
if (got[2] == ARGV[3] or got[2] == ARGV[4]) and got[1] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'format', ARGV[2])
  from, got[2] = got[2], ARGV[2]
end
if got[2] == ARGV[2] and ARGV[5] ~= '' then redis.call('HSETNX', KEYS[1], 'seqtags', ARGV[5]) end
return {got[1], got[2], from, redis.call('HGET', KEYS[1], 'seqtags') or ''}
`)

// checkMeta refuses to join a deployment whose first instance recorded
// another bucket count or layout format under this prefix: with another
// bucket count, two instances would hash topics into different buckets
// and the due index one writes would not be the one the other's timer
// reads, so jobs would fire late or never.
//
// On a Cluster it also learns from which seq on the seq entries are in
// their group's shard (keys.go: seqShard). The seq it offers is past
// every seq handed out before, since it takes it from the counter: an
// instance of an earlier format, which would write below it, has been
// stopped before the upgrade, and an instance of this format writes only
// after it has read what the deployment recorded.
func (s *Store) checkMeta(ctx context.Context) error {
	offer := ""
	if !s.oneNode {
		last, err := seqScript.Exec(ctx, s.c, []string{s.k.seqCounter()}, []string{"1"}).AsInt64()
		if err != nil {
			return fmt.Errorf("redisstore: %s: read %s: %w", describe(s.opt), s.k.seqCounter(), unavailable("meta", err))
		}
		offer = strconv.FormatInt(last+1, 10)
	}
	got, err := metaScript.Exec(ctx, s.c, []string{s.k.meta()},
		[]string{strconv.Itoa(s.opt.Buckets), layoutFormat, upgradableFormats[0], upgradableFormats[1], offer}).AsStrSlice()
	if err != nil {
		return fmt.Errorf("redisstore: %s: read %s: %w", describe(s.opt), s.k.meta(), unavailable("meta", err))
	}
	if len(got) != 4 {
		return errors.New("redisstore: meta: short reply")
	}
	if got[2] != "" {
		s.log.Info("redisstore: upgraded the deployment's key layout; job records are rewritten as they change (docs/redis.md)",
			"prefix", s.opt.Prefix, "from", got[2], "to", layoutFormat)
	}
	if got[1] != layoutFormat {
		return fmt.Errorf("redisstore: the deployment under key prefix %q uses key layout format %q, this delayq writes %q: use another --redis-prefix or the matching delayq version", s.opt.Prefix, got[1], layoutFormat)
	}
	if got[3] != "" {
		if s.oneNode {
			return fmt.Errorf("redisstore: the deployment under key prefix %q was written by a Redis Cluster (its seq entries are in tagged shards from seq %s on); one Redis server cannot serve it: open it on a Cluster, or use another --redis-prefix", s.opt.Prefix, got[3])
		}
		from, err := strconv.ParseUint(got[3], 10, 64)
		if err != nil {
			return fmt.Errorf("redisstore: the deployment under key prefix %q records seqtags %q, not a seq", s.opt.Prefix, got[3])
		}
		s.k.tagged, s.k.tagsFrom = true, from
	}
	if got[0] != strconv.Itoa(s.opt.Buckets) {
		return fmt.Errorf("redisstore: the deployment under key prefix %q uses %s timer buckets, this instance was started with --redis-buckets %d: start every instance of a deployment with the same count (to change it, stop every instance and delete the key %s; see docs/redis.md)",
			s.opt.Prefix, got[0], s.opt.Buckets, s.k.meta())
	}
	return nil
}
