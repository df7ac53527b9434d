package redisstore

import (
	"context"
	"fmt"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
)

// Redis replicates asynchronously: a primary answers a write before any
// replica has it, so a failover to a replica can lose writes the primary
// acknowledged. With Options.WaitReplicas, every script that acknowledges
// a client's write is followed by WAIT numreplicas timeout, and the write
// is acknowledged only once WAIT confirms that many replicas have it.
//
// WAIT counts the replicas that have everything up to the last write of
// the connection it is sent on, so it must follow the script on the same
// connection. rueidis multiplexes the commands of many goroutines over a
// few pipelined connections and sends blocking commands (WAIT among them)
// over connections of a separate pool, so a WAIT sent with Do would ask
// about some other connection's writes. The script and its WAIT therefore
// run on one dedicated connection (Client.Dedicated), one after the other.
// A put's earlier steps (id claims, seq, index) ran, and were answered,
// before its insert script, so they lie below the insert in the
// replication stream and the insert's WAIT covers them too.

// pinned is a rueidis.Client whose Do and DoMulti go to one dedicated
// connection, so rueidis.Lua's Exec (EVALSHA, then EVAL on NOSCRIPT) runs
// there.
type pinned struct {
	rueidis.Client
	dc rueidis.DedicatedClient
}

func (p pinned) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	return p.dc.Do(ctx, cmd)
}

func (p pinned) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	return p.dc.DoMulti(ctx, cmds...)
}

// acked runs write, which sends its commands through c. When the store
// waits for replicas, c is one dedicated connection, and a write that
// succeeded is followed there by WAIT: acked then returns a
// *delayq.ReplicationError (wrapped) when fewer replicas than asked
// confirmed it in time. The write's effect stands either way; the error
// says it may not survive a failover. A write that failed is returned
// as is, with nothing waited for.
func (s *Store) acked(ctx context.Context, op string, write func(c rueidis.Client) error) error {
	if s.opt.WaitReplicas <= 0 {
		return write(s.c)
	}
	var werr, waitErr error
	err := s.c.Dedicated(func(dc rueidis.DedicatedClient) error {
		if werr = write(pinned{Client: s.c, dc: dc}); werr != nil {
			return nil
		}
		waitErr = s.waitReplicas(ctx, op, dc)
		return nil
	})
	switch {
	case werr != nil:
		return werr
	case waitErr != nil:
		return waitErr
	case err != nil:
		return unavailable(op, err)
	}
	return nil
}

// waitReplicas sends WAIT on dc and says how far the last write got.
func (s *Store) waitReplicas(ctx context.Context, op string, dc rueidis.DedicatedClient) error {
	want := s.opt.WaitReplicas
	n, err := dc.Do(ctx, dc.B().Wait().Numreplicas(int64(want)).Timeout(s.opt.WaitTimeout.Milliseconds()).Build()).AsInt64()
	if err != nil {
		return fmt.Errorf("redisstore: %s: %w", op, &delayq.ReplicationError{Op: op, Wanted: want, Confirmed: -1, Timeout: s.opt.WaitTimeout, Cause: err})
	}
	if int(n) < want {
		return fmt.Errorf("redisstore: %s: %w", op, &delayq.ReplicationError{Op: op, Wanted: want, Confirmed: int(n), Timeout: s.opt.WaitTimeout})
	}
	return nil
}
