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
// keys out differently never share a prefix.
const layoutFormat = "1"

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
// its own against the deployment's in one atomic step.
//
//	KEYS[1] -> P:meta
//	ARGV[1] -> buckets
//	ARGV[2] -> layout format
//	Returns: {buckets, format} as recorded
var metaScript = rueidis.NewLuaScript(`
redis.call('HSETNX', KEYS[1], 'buckets', ARGV[1])
redis.call('HSETNX', KEYS[1], 'format', ARGV[2])
return redis.call('HMGET', KEYS[1], 'buckets', 'format')
`)

// checkMeta refuses to join a deployment whose first instance recorded
// another bucket count or layout format under this prefix: with another
// bucket count, two instances would hash topics into different buckets
// and the due index one writes would not be the one the other's timer
// reads, so jobs would fire late or never.
func (s *Store) checkMeta(ctx context.Context) error {
	got, err := metaScript.Exec(ctx, s.c, []string{s.k.meta()},
		[]string{strconv.Itoa(s.opt.Buckets), layoutFormat}).AsStrSlice()
	if err != nil {
		return fmt.Errorf("redisstore: %s: read %s: %w", describe(s.opt), s.k.meta(), unavailable("meta", err))
	}
	if len(got) != 2 {
		return errors.New("redisstore: meta: short reply")
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
