package cli

import (
	"strconv"
	"time"

	"github.com/alecthomas/kong"

	"github.com/delayq/delayq/internal/config"
)

// redisFlags are serve's flags that tune the Redis backend
// (config.RedisSettings documents each; docs/redis.md explains them).
type redisFlags struct {
	RedisPrefix       string        `name:"redis-prefix" env:"DELAYQ_REDIS_PREFIX" default:"${redis_prefix}" group:"Redis" help:"Start every Redis key with this (letters, digits, '_', '-', '.'), so deployments sharing one Redis never meet."`
	RedisBuckets      int           `name:"redis-buckets" env:"DELAYQ_REDIS_BUCKETS" default:"${redis_buckets}" group:"Redis" help:"Timer buckets leased among the instances; every instance of a deployment must use the same count (one started with another refuses to start)."`
	RedisVolatile     bool          `name:"redis-volatile" env:"DELAYQ_REDIS_VOLATILE" group:"Redis" help:"Start on a Redis that persists nothing (no AOF, no RDB save points) or whose CONFIG is disabled; a Redis restart then loses every job."`
	RedisWaitReplicas int           `name:"redis-wait-replicas" env:"DELAYQ_REDIS_WAIT_REPLICAS" default:"0" group:"Redis" help:"Acknowledge a write only once Redis WAIT confirms this many replicas have it (0: once the primary has it)."`
	RedisWaitTimeout  time.Duration `name:"redis-wait-timeout" env:"DELAYQ_REDIS_WAIT_TIMEOUT" default:"${redis_wait_timeout}" group:"Redis" help:"How long a write waits for --redis-wait-replicas; one not confirmed in time is answered 503, saying it is on the primary."`
}

// config returns the flags as config.RedisSettings.
func (f *redisFlags) config() config.RedisSettings {
	return config.RedisSettings{
		RedisPrefix: f.RedisPrefix, RedisBuckets: f.RedisBuckets, RedisVolatile: f.RedisVolatile,
		RedisWaitReplicas: f.RedisWaitReplicas, RedisWaitTimeout: f.RedisWaitTimeout,
	}
}

// redisVars feeds config.DefaultRedisSettings into the flags' defaults.
func redisVars() kong.Vars {
	d := config.DefaultRedisSettings()
	return kong.Vars{
		"redis_prefix":       d.RedisPrefix,
		"redis_buckets":      strconv.Itoa(d.RedisBuckets),
		"redis_wait_timeout": d.RedisWaitTimeout.String(),
	}
}
