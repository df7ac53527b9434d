package redisstore

import (
	"context"
	"crypto/sha1"
	"encoding/hex"

	"github.com/redis/rueidis"
)

// pipedScript is a script whose calls can go in one DoMulti pipeline
// with other commands (doPiped). rueidis.Lua runs one call per Exec, and
// its ExecMulti sends SCRIPT LOAD to every node first (execmulti.go);
// the global steps after a Cluster's grouped finishes are scripts and
// plain commands on many slots, which one DoMulti sends to their masters
// in one round trip.
type pipedScript struct {
	lua *rueidis.Lua
	sha string // the SHA-1 of its text, as EVALSHA names it
}

func newPipedScript(src string) *pipedScript {
	sum := sha1.Sum([]byte(src))
	return &pipedScript{lua: rueidis.NewLuaScript(src), sha: hex.EncodeToString(sum[:])}
}

// pipedCall is one command of a doPiped pipeline: a call of script with
// keys and args, or the plain command cmd when script is nil.
type pipedCall struct {
	script     *pipedScript
	keys, args []string
	cmd        rueidis.Completed
}

// doPiped sends calls in one DoMulti and returns their results in order.
// A script call that meets a node without the script (NOSCRIPT: a node
// restarted, or never ran it) is sent again through rueidis.Lua, whose
// EVAL loads it there.
func doPiped(ctx context.Context, c rueidis.Client, calls []pipedCall) []rueidis.RedisResult {
	cmds := make(rueidis.Commands, len(calls))
	for i, p := range calls {
		if p.script == nil {
			cmds[i] = p.cmd
			continue
		}
		cmds[i] = c.B().Evalsha().Sha1(p.script.sha).Numkeys(int64(len(p.keys))).Key(p.keys...).Arg(p.args...).Build()
	}
	out := c.DoMulti(ctx, cmds...)
	for i, p := range calls {
		if p.script == nil {
			continue
		}
		if err, ok := rueidis.IsRedisErr(out[i].Error()); ok && err.IsNoScript() {
			out[i] = p.script.lua.Exec(ctx, c, p.keys, p.args)
		}
	}
	return out
}
