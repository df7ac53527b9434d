package redisstore

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"
)

// sweepEvery is how often an instance re-marks the topics of its buckets
// (see Store.sweep).
const sweepEvery = 30 * time.Second

// leases holds this instance's timer buckets.
//
// Every LeaseTTL/3 an instance heartbeats (P:instances, score = expiry),
// counts the live instances n, and aims to hold ceil(Buckets/n) buckets:
// it renews the leases it holds (compare-and-PEXPIRE), gives back any
// above its share (compare-and-DEL) and takes free ones (SET NX PX) up to
// it. A dead instance's leases and heartbeat run out after LeaseTTL, so the
// live ones take its buckets within LeaseTTL plus one round; one that
// joins raises n, the others shed their surplus and it takes it.
//
// Leases only divide the work: correctness never depends on them, because
// every move of a job is one script that moves only what is still due.
type leases struct {
	s      *Store
	ttl    time.Duration
	offset int // where this instance starts looking for free buckets

	mu        sync.Mutex
	mine      map[int]bool // guarded by mu
	renewed   time.Time    // guarded by mu: when the last round succeeded (or a lease was taken)
	lastRound time.Time    // guarded by mu: when the last round that completed began
	lastSweep time.Time    // guarded by mu
	failing   bool         // guarded by mu: the last round failed (logged once)
}

func newLeases(s *Store) *leases {
	return &leases{
		s:      s,
		ttl:    s.opt.LeaseTTL,
		offset: int(crc32.ChecksumIEEE([]byte(s.opt.InstanceID)) % uint32(s.opt.Buckets)),
		mine:   map[int]bool{},
	}
}

// held returns the buckets this instance leases, sorted; none once the
// leases may have run out because renewals failed.
func (l *leases) held() []int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if time.Since(l.renewed) > l.ttl {
		return nil
	}
	out := make([]int, 0, len(l.mine))
	for b := range l.mine {
		out = append(out, b)
	}
	slices.Sort(out)
	return out
}

// run does a round every ttl/3 until ctx is done.
func (l *leases) run(ctx context.Context) {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := l.round(ctx)
		l.mu.Lock()
		was := l.failing
		l.failing = err != nil
		l.mu.Unlock()
		switch {
		case err != nil && !was && ctx.Err() == nil:
			l.s.log.Error("redisstore: cannot renew bucket leases; timer paused until redis answers", "err", err)
		case err == nil && was:
			l.s.log.Info("redisstore: redis answers again; bucket leases renewed")
		}
	}
}

// renewScript extends a lease if this instance still holds it.
//
//	KEYS[1] -> the bucket's lease key
//	ARGV[1] -> this instance's id
//	ARGV[2] -> lease ttl (ms)
//	Returns: 1 when renewed, 0 when the lease is another's or gone
var renewScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
`)

// dropScript deletes a lease if this instance holds it.
//
//	KEYS[1] -> the bucket's lease key
//	ARGV[1] -> this instance's id
//	Returns: 1 when deleted
var dropScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
`)

// round heartbeats and brings the held buckets to this instance's share.
func (l *leases) round(ctx context.Context) error {
	start := time.Now()
	before := l.held()
	live, err := l.heartbeat(ctx, start)
	if err != nil {
		return err
	}
	if err := l.renew(ctx); err != nil {
		return err
	}
	share := (l.s.opt.Buckets + live - 1) / live
	if err := l.shed(ctx, share); err != nil {
		return err
	}
	gained, err := l.take(ctx, share)
	if err != nil {
		return err
	}
	l.logChange(before, gained, live)
	l.mu.Lock()
	l.renewed, l.lastRound = start, start
	sweepAll := time.Since(l.lastSweep) > sweepEvery
	if sweepAll {
		l.lastSweep = start
	}
	l.mu.Unlock()
	if sweepAll {
		gained = l.held()
	}
	if len(gained) > 0 {
		if err := l.s.sweep(ctx, gained); err != nil {
			return err
		}
		l.s.fan.Send(dueNow().toStore())
	}
	return nil
}

// logChange logs, once per round that changed them, the timer buckets
// this instance gained (another's ran out or were handed back) and lost
// (shed to a new instance, or run out while Redis was away), so an
// operator can follow which instance fires which jobs.
func (l *leases) logChange(before, gained []int, live int) {
	now := l.held()
	var lost []int
	for _, b := range before {
		if !slices.Contains(now, b) {
			lost = append(lost, b)
		}
	}
	if len(gained) == 0 && len(lost) == 0 {
		return
	}
	gained = slices.Sorted(slices.Values(gained))
	l.s.log.Info("redisstore: timer buckets changed hands", "instance", l.s.opt.InstanceID,
		"gained", fmt.Sprint(gained), "lost", fmt.Sprint(lost), "held", len(now), "instances", live)
}

// heartbeat records this instance as live and returns how many are.
func (l *leases) heartbeat(ctx context.Context, now time.Time) (int, error) {
	c, k, o := l.s.c, l.s.k, l.s.opt
	nowMS := now.UnixMilli()
	url, protocols := l.s.advertised()
	cmds := rueidis.Commands{
		c.B().Zadd().Key(k.instances()).ScoreMember().ScoreMember(float64(nowMS+l.ttl.Milliseconds()), o.InstanceID).Build(),
		c.B().Hset().Key(k.instance(o.InstanceID)).FieldValue().FieldValue("url", url).
			FieldValue("protocols", joinComma(protocols)).FieldValue("since", strconv.FormatInt(l.s.since.UnixMilli(), 10)).Build(),
		c.B().Pexpire().Key(k.instance(o.InstanceID)).Milliseconds(3 * l.ttl.Milliseconds()).Build(),
		c.B().Zremrangebyscore().Key(k.instances()).Min("-inf").Max(strconv.FormatInt(nowMS-time.Minute.Milliseconds(), 10)).Build(),
		c.B().Zcount().Key(k.instances()).Min(strconv.FormatInt(nowMS, 10)).Max("+inf").Build(),
	}
	res := c.DoMulti(ctx, cmds...)
	for _, r := range res {
		if err := r.Error(); err != nil {
			return 0, unavailable("heartbeat", err)
		}
	}
	n, _ := res[len(res)-1].AsInt64()
	return max(int(n), 1), nil
}

// renew extends every held lease and forgets the ones lost.
func (l *leases) renew(ctx context.Context) error {
	mine := l.held()
	l.mu.Lock()
	for b := range l.mine {
		if !slices.Contains(mine, b) {
			mine = append(mine, b) // renewals failed for a while: try again
		}
	}
	l.mu.Unlock()
	execs := make([]rueidis.LuaExec, len(mine))
	for i, b := range mine {
		execs[i] = rueidis.LuaExec{Keys: []string{l.s.k.lease(b)}, Args: []string{l.s.opt.InstanceID, strconv.FormatInt(l.ttl.Milliseconds(), 10)}}
	}
	for i, r := range execMulti(ctx, l.s.c, renewScript, execs) {
		ok, err := r.AsInt64()
		if err != nil {
			return unavailable("renew lease", err)
		}
		if ok == 0 {
			l.mu.Lock()
			delete(l.mine, mine[i])
			l.mu.Unlock()
		}
	}
	return nil
}

// shed gives back the buckets above share, the last ones first.
func (l *leases) shed(ctx context.Context, share int) error {
	mine := l.held()
	for len(mine) > share {
		b := mine[len(mine)-1]
		mine = mine[:len(mine)-1]
		if err := dropScript.Exec(ctx, l.s.c, []string{l.s.k.lease(b)}, []string{l.s.opt.InstanceID}).Error(); err != nil {
			return unavailable("give back lease", err)
		}
		l.mu.Lock()
		delete(l.mine, b)
		l.mu.Unlock()
	}
	return nil
}

// take leases free buckets up to share and returns the ones gained.
func (l *leases) take(ctx context.Context, share int) ([]int, error) {
	n := len(l.held())
	var gained []int
	for i := 0; i < l.s.opt.Buckets && n < share; i++ {
		b := (l.offset + i) % l.s.opt.Buckets
		l.mu.Lock()
		have := l.mine[b]
		l.mu.Unlock()
		if have {
			continue
		}
		cmd := l.s.c.B().Set().Key(l.s.k.lease(b)).Value(l.s.opt.InstanceID).Nx().Px(l.ttl).Build()
		err := l.s.c.Do(ctx, cmd).Error()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return gained, unavailable("take lease", err)
		}
		l.mu.Lock()
		l.mine[b] = true
		l.renewed = time.Now()
		l.mu.Unlock()
		gained = append(gained, b)
		n++
	}
	return gained, nil
}

// releaseAll gives every lease back and leaves the membership, so the
// other instances take the buckets in their next round.
func (l *leases) releaseAll(ctx context.Context) {
	l.mu.Lock()
	var mine []int
	for b := range l.mine {
		mine = append(mine, b)
	}
	l.mine = map[int]bool{}
	l.mu.Unlock()
	for _, b := range mine {
		dropScript.Exec(ctx, l.s.c, []string{l.s.k.lease(b)}, []string{l.s.opt.InstanceID})
	}
	c, k := l.s.c, l.s.k
	c.DoMulti(ctx,
		c.B().Zrem().Key(k.instances()).Member(l.s.opt.InstanceID).Build(),
		c.B().Del().Key(k.instance(l.s.opt.InstanceID)).Build())
}

func joinComma(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += s
	}
	return out
}
