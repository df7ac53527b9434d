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
// change), so the first format 2 instance upgrades a format 1 deployment
// in place (metaScript): no key is rewritten at start.
const layoutFormat = "2"

// upgradableFormat is the older layout a format 2 instance reads and
// upgrades the deployment's meta key from. An instance of that version
// still running would not read the new records: stop every one before
// the first instance of this version starts (docs/redis.md).
const upgradableFormat = "1"

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
// the upgradable format with the same bucket count is moved to this
// instance's format in the same step, so of several instances starting
// together exactly one upgrades it.
//
//	KEYS[1] -> P:meta
//	ARGV[1] -> buckets
//	ARGV[2] -> layout format
//	ARGV[3] -> the format this one upgrades from
//	Returns: {buckets, format, "1" when this call upgraded it else "0"}
var metaScript = rueidis.NewLuaScript(`
redis.call('HSETNX', KEYS[1], 'buckets', ARGV[1])
redis.call('HSETNX', KEYS[1], 'format', ARGV[2])
local got = redis.call('HMGET', KEYS[1], 'buckets', 'format')
if got[2] == ARGV[3] and got[1] == ARGV[1] then
  redis.call('HSET', KEYS[1], 'format', ARGV[2])
  return {got[1], ARGV[2], '1'}
end
return {got[1], got[2], '0'}
`)

// checkMeta refuses to join a deployment whose first instance recorded
// another bucket count or layout format under this prefix: with another
// bucket count, two instances would hash topics into different buckets
// and the due index one writes would not be the one the other's timer
// reads, so jobs would fire late or never.
func (s *Store) checkMeta(ctx context.Context) error {
	got, err := metaScript.Exec(ctx, s.c, []string{s.k.meta()},
		[]string{strconv.Itoa(s.opt.Buckets), layoutFormat, upgradableFormat}).AsStrSlice()
	if err != nil {
		return fmt.Errorf("redisstore: %s: read %s: %w", describe(s.opt), s.k.meta(), unavailable("meta", err))
	}
	if len(got) != 3 {
		return errors.New("redisstore: meta: short reply")
	}
	if got[2] == "1" {
		s.log.Info("redisstore: upgraded the deployment's key layout; job records are rewritten as they change (docs/redis.md)",
			"prefix", s.opt.Prefix, "from", upgradableFormat, "to", layoutFormat)
	}
	if got[1] != layoutFormat {
		return fmt.Errorf("redisstore: the deployment under key prefix %q uses key layout format %q, this delayq writes %q: use another --redis-prefix or the matching delayq version", s.opt.Prefix, got[1], layoutFormat)
	}
	if got[0] != strconv.Itoa(s.opt.Buckets) {
		return fmt.Errorf("redisstore: the deployment under key prefix %q uses %s timer buckets, this instance was started with --redis-buckets %d: start every instance of a deployment with the same count (to change it, stop every instance and delete the key %s; see docs/redis.md)",
			s.opt.Prefix, got[0], s.opt.Buckets, s.k.meta())
	}
	return nil
}
