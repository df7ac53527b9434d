package redisstore

import (
	"context"
	"sync"

	"github.com/redis/rueidis"
)

// execMulti runs script once per exec and returns the results in order.
// rueidis's Lua.ExecMulti sends SCRIPT LOAD to every node before every
// call (rueidis v1.0.79, lua.go): one extra command per node per call,
// which on a 3-master Cluster was 3 SCRIPT LOADs per put and 7 per
// put+reserve+delete. Exec sends EVALSHA and falls back to EVAL only when
// a node lacks the script; concurrent calls share round trips through
// rueidis's automatic pipelining.
func execMulti(ctx context.Context, c rueidis.Client, script *rueidis.Lua, execs []rueidis.LuaExec) []rueidis.RedisResult {
	out := make([]rueidis.RedisResult, len(execs))
	if len(execs) == 1 {
		out[0] = script.Exec(ctx, c, execs[0].Keys, execs[0].Args)
		return out
	}
	var wg sync.WaitGroup
	for i, e := range execs {
		wg.Go(func() { out[i] = script.Exec(ctx, c, e.Keys, e.Args) })
	}
	wg.Wait()
	return out
}
