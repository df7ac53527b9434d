// Package redisstore is the Redis backend of delayq: all state lives in
// Redis, so any number of stateless delayq instances can serve the same
// jobs, and an instance that dies loses nothing.
//
// Every state transition of a job is one Lua script over the keys of its
// topic, which share the hash tag {topic} (keys.go), so scripts are atomic
// however many instances run and work unchanged on Redis Cluster. Global
// indexes (id and seq lookups, the topic registry, timer buckets) live in
// other slots; they are written before or after the topic script and are
// only ever trusted after a check against the topic, so a crash between
// the two steps leaves nothing wrong (docs/redis.md). On one Redis server
// (not a Cluster) the put, reserve and delete scripts write those global
// entries themselves, one step per transition (onenode.go), and the puts
// that arrive while one is in flight share one script call (putgroup.go);
// on a Cluster the puts of a topic that arrive while one of it is in
// flight share each step, one insert script among them (clusterput.go).
// Concurrent finishes and single-topic reserves are written in groups,
// one script per topic, on one node and on a Cluster alike (finish.go,
// reservegroup.go). The ids the server makes carry their job's seq, so
// their jobs need no id claim (freshid.go).
//
// The timer work is split into buckets leased by the live instances
// (leases.go); Tick promotes due work of the leased buckets only. Instances
// wake each other's long-poll waiters and timers through one pub/sub
// channel (notify.go; a ready count only to instances that marked its
// topic as waited on, store.WaitMarker) and list themselves for GET
// /v1/cluster (cluster.go).
//
// It owns no semantics beyond the store.Store contract; validation, waiting
// and the timer loop are the engine's.
package redisstore
