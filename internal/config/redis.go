package config

import (
	"time"

	"github.com/delayq/delayq/internal/store/redisstore"
)

// RedisSettings tune the Redis backend (used only with Config.Redis;
// docs/redis.md explains each).
type RedisSettings struct {
	// RedisPrefix starts every Redis key of this deployment, so several
	// deployments can share one Redis (or one Cluster) without their keys
	// ever meeting. Default "delayq". Letters, digits, '_', '-' and '.'
	// (redisstore.CheckPrefix).
	RedisPrefix string
	// RedisBuckets is how many parts the timer work is split into, leased
	// among the instances. Every instance of a deployment must use the
	// same count: the first one records it under the prefix, and an
	// instance started with another count refuses to start. Default 16,
	// at most redisstore.MaxBuckets.
	RedisBuckets int
	// RedisVolatile lets the server start on a Redis that persists
	// nothing (no AOF, no RDB save points) or whose persistence it cannot
	// read (CONFIG disabled): a Redis restart then loses every job.
	// Default false: such a Redis is refused.
	RedisVolatile bool
	// RedisWaitReplicas, above 0, acknowledges a write only once Redis
	// WAIT confirms that many replicas have it, so a failover to one of
	// them loses no acknowledged job. Default 0: acknowledged once the
	// primary has it (replication is asynchronous).
	RedisWaitReplicas int
	// RedisWaitTimeout bounds that wait; a write not confirmed in time
	// is answered 503 saying it is on the primary and how many replicas
	// confirmed it. Default 1s.
	RedisWaitTimeout time.Duration
}

// DefaultRedisSettings returns the documented defaults.
func DefaultRedisSettings() RedisSettings {
	return RedisSettings{RedisPrefix: "delayq", RedisBuckets: 16, RedisWaitTimeout: time.Second}
}

// maxRedisWaitTimeout bounds RedisWaitTimeout: a write held longer than
// this holds its client longer than any client waits.
const maxRedisWaitTimeout = time.Minute

// validate adds the problems of r to Validate's list.
func (r RedisSettings) validate(add func(field, format string, args ...any)) {
	if err := redisstore.CheckPrefix(r.RedisPrefix); err != nil {
		add("redis-prefix", "%v", err)
	}
	if r.RedisBuckets < 1 || r.RedisBuckets > redisstore.MaxBuckets {
		add("redis-buckets", "%d is out of range (1 to %d)", r.RedisBuckets, redisstore.MaxBuckets)
	}
	if r.RedisWaitReplicas < 0 || r.RedisWaitReplicas > 100 {
		add("redis-wait-replicas", "%d is out of range (0 to 100)", r.RedisWaitReplicas)
	}
	if r.RedisWaitTimeout <= 0 || r.RedisWaitTimeout > maxRedisWaitTimeout {
		add("redis-wait-timeout", "%v is out of range (more than 0, at most %v)", r.RedisWaitTimeout, maxRedisWaitTimeout)
	}
}
