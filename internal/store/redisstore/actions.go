package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Every script in this file takes a job reference first:
//
//	KEYS[1]    -> the job's topic key prefix (keys.go)
//	ARGV[1]    -> "i" (by id) or "s" (by seq)
//	ARGV[2]    -> the id or seq
//
// and answers {"OK", record} or {status} (NOTFOUND, NOTRESERVED, STATE).

// wokeLua defines woke(j, me), the last value of the answer of a script
// that may have made job j of its topic ready: 1 when j is ready and an
// instance other than me waits on the topic (waitedLua), else 0. The
// caller publishes the ready count only on 1 (afterMove), so a move to
// ready that no other instance waits for sends Redis no PUBLISH
// (SPUBLISH on a Cluster), and one that another waits for costs no
// command more than the publish (issue 31).
const wokeLua = waitedLua + `
local function woke(j, me)
  if j.state == 'ready' and waited(K_B .. 'waiting', me) then return 1 end
  return 0
end
`

// priArg is "" for keep, else the new priority.
func priArg(p *uint32) string {
	if p == nil {
		return ""
	}
	return strconv.FormatUint(uint64(*p), 10)
}

// releaseScript hands a reserved job back.
//
//	ARGV[3] -> reservation
//	ARGV[4] -> now (unix ms)
//	ARGV[5] -> due (unix ms)
//	ARGV[6] -> delay (ms) recorded on the job
//	ARGV[7] -> new priority, or "" to keep it
//	ARGV[8] -> reason (LastReason)
//	ARGV[9] -> this instance's id (its own waiting mark does not count)
//	Returns: {"OK", record, woke}
var releaseScript = newScript(wokeLua + `
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if not held(j, ARGV[3]) then return {'NOTRESERVED'} end
unplace(seq, j)
clear(j)
-- Each attempt counts once, by its outcome: a release that buries is a bury.
if not spent(j) then incr(j, 'rel') end
j.delay = ARGV[6]
if ARGV[7] ~= '' then j.pri = ARGV[7] end
local now = clock(ARGV[4])
failed(j, ARGV[8], fmt(now))
if spent(j) then hend(j, fmt(now), 'buried', ARGV[8]) else hend(j, fmt(now), 'released', ARGV[8]) end
if spent(j) then bury(j, fmt(now))
elseif tonumber(ARGV[5]) > now then j.state = 'delayed'; j.due = ARGV[5]
else j.state = 'ready'; j.due = ARGV[5] end
place(seq, j)
return {'OK', save(seq, j), woke(j, ARGV[9])}
`)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	due := ms(p.Due)
	r, err := s.runJob(ctx, "release", releaseScript, p.Ref, p.Ref.Reservation, msString(p.Now),
		strconv.FormatInt(due, 10), strconv.FormatInt(p.Delay.Milliseconds(), 10), priArg(p.Priority), p.Reason,
		s.opt.InstanceID)
	if err != nil {
		return nil, err
	}
	s.afterMove(ctx, r)
	return r.job, nil
}

// afterMove marks the bucket and tells the other instances after a job
// went delayed (their timer) or ready (their waiters: only when its
// script found another instance waiting on the topic, r.woke). A lost
// mark is repaired by the sweep; a lost event only costs latency.
func (s *Store) afterMove(ctx context.Context, r record) {
	switch j := r.job; j.State {
	case delayq.StateDelayed:
		// As a reserve's deadline: the due time is published only when it
		// lowered the bucket's entry and another instance listens.
		s.markDeadlines(ctx, map[string]int64{j.Topic: ms(j.Due)})
	case delayq.StateReady:
		if r.woke {
			s.publish(ctx, event{topic: j.Topic, count: 1})
		}
	}
}

// touchScript extends a reservation.
//
//	ARGV[3] -> reservation
//	ARGV[4] -> now (unix ms)
//	ARGV[5] -> the caller's exact now rounded up (unix ms), where the new
//	           TTR begins unless the topic's clock is later
//	Returns: {"OK", record}
var touchScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if not held(j, ARGV[3]) then return {'NOTRESERVED'} end
unplace(seq, j)
j.deadline = fmt(math.max(clock(ARGV[4]), tonumber(ARGV[5])) + tonumber(j.ttr))
place(seq, j)
return {'OK', save(seq, j)}
`)

// Touch implements store.Store. A later deadline needs no bucket mark: the
// bucket entry may be early, never late.
func (s *Store) Touch(ctx context.Context, p store.TouchParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "touch", touchScript, p.Ref, p.Ref.Reservation, msString(p.Now), ceilMSString(p.Now))
	return r.job, err
}

// buryScript buries a reserved job.
//
//	ARGV[3] -> reservation
//	ARGV[4] -> now (unix ms)
//	ARGV[5] -> new priority, or "" to keep it
//	ARGV[6] -> reason (LastReason)
//	Returns: {"OK", record}
var buryScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if not held(j, ARGV[3]) then return {'NOTRESERVED'} end
unplace(seq, j)
clear(j)
if ARGV[5] ~= '' then j.pri = ARGV[5] end
local now = fmt(clock(ARGV[4]))
failed(j, ARGV[6], now)
hend(j, now, 'buried', ARGV[6])
bury(j, now)
place(seq, j)
return {'OK', save(seq, j)}
`)

// Bury implements store.Store.
func (s *Store) Bury(ctx context.Context, p store.BuryParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "bury", buryScript, p.Ref, p.Ref.Reservation, msString(p.Now), priArg(p.Priority), p.Reason)
	return r.job, err
}

// kickJobScript moves one buried or delayed job to ready.
//
//	ARGV[3] -> now (unix ms)
//	ARGV[4] -> this instance's id (its own waiting mark does not count)
//	Returns: {"OK", record, woke} or {"STATE"}
var kickJobScript = newScript(wokeLua + `
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if j.state ~= 'buried' and j.state ~= 'delayed' then return {'STATE'} end
unplace(seq, j)
j.state = 'ready'; j.due = fmt(clock(ARGV[3])); incr(j, 'kck')
place(seq, j)
return {'OK', save(seq, j), woke(j, ARGV[4])}
`)

// KickJob implements store.Store.
func (s *Store) KickJob(ctx context.Context, p store.KickJobParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "kick", kickJobScript, p.Ref, msString(p.Now), s.opt.InstanceID)
	if err != nil {
		return nil, err
	}
	s.afterMove(ctx, r)
	return r.job, nil
}

// kickScript kicks up to n jobs of a topic: buried ones, delayed ones, or
// (beanstalkd's rule) buried ones if any, else delayed ones.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most jobs to kick
//	ARGV[3]    -> "buried", "delayed", or "" for buried if any, else delayed
//	ARGV[4]    -> this instance's id (its own waiting mark does not count)
//	Returns:   {how many moved, 1 when that count is to be published
//	           (another instance waits on the topic, waitedLua) else 0}
var kickScript = newScript(waitedLua + `
local now, max, which = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local members = {}
if which ~= 'delayed' then members = redis.call('ZRANGE', K_BURIED, 0, max - 1) end
if which == 'delayed' or (which == '' and #members == 0) then members = redis.call('ZRANGE', K_DELAYED, 0, max - 1) end
if #members > 0 then now = fmt(clock(now)) end
for _, m in ipairs(members) do
  local seq = unpad(m)
  local j = load(seq)
  unplace(seq, j)
  j.state = 'ready'; j.due = now; incr(j, 'kck')
  place(seq, j)
  save(seq, j)
end
return {#members, (#members > 0 and waited(K_B .. 'waiting', ARGV[4])) and 1 or 0}
`)

// Kick implements store.Store.
func (s *Store) Kick(ctx context.Context, p store.KickParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if p.Max <= 0 || (p.State != "" && p.State != delayq.StateBuried && p.State != delayq.StateDelayed) {
		return 0, nil
	}
	var n, woke int64
	var serr error
	err := s.acked(ctx, "kick", func(c rueidis.Client) error {
		var arr []rueidis.RedisMessage
		arr, serr = kickScript.Exec(ctx, c, s.k.topic(p.Topic).slice(),
			[]string{msString(p.Now), strconv.Itoa(p.Max), string(p.State), s.opt.InstanceID}).ToArray()
		if serr == nil && len(arr) != 2 {
			serr = fmt.Errorf("reply of %d values, want 2", len(arr))
		}
		if serr == nil {
			n, serr = arr[0].AsInt64()
		}
		if serr == nil {
			woke, serr = arr[1].AsInt64()
		}
		return serr
	})
	if serr != nil {
		return 0, unavailable("kick", serr)
	}
	if err != nil {
		return 0, err
	}
	if n > 0 && woke == 1 {
		s.publish(ctx, event{topic: p.Topic, count: int(n)})
	}
	return int(n), nil
}

// trimEvery is how many retained deletes of a topic's state share one
// trim of its ended index to the window (one in trimEvery by seq, and
// seqs are consecutive), so the index holds the window's members plus
// about trimEvery more.
const trimEvery = "16"

// deleteScript removes a job, or, with a retention, keeps it as a
// retained job (store.Retention): its record gets the retained state,
// ended, no reservation, no body unless bodies are kept, and the
// retention as its TTL, so Redis drops it by itself; on a Cluster
// P:{t}:r:<id> names its seq for as long (on one node the retained
// claim does; a job whose id the server made has no claim and needs
// neither: its id carries its seq); and the topic's ZSET of that state
// lists it by ended. The seq's entry stays in its shard and the ZSET has
// no TTL: what trims the ZSET to the window drops both. On one node
// that is this script on one write in trimEvery and the sweep
// (trimEnded); on a Cluster, where this script cannot reach the shard,
// the sweep alone (trimEndedCluster), and this script only takes off,
// on one write in trimEvery, a TTL an earlier build gave the ZSET.
//
//	ARGV[3] -> reservation ("" for none)
//	ARGV[4] -> "1" to delete whatever the state (operator delete)
//	ARGV[5] -> now (unix ms): when the job ended
//	ARGV[6] -> retention (ms); "0" keeps nothing
//	ARGV[7] -> "1" to keep the body of a retained job
//	ARGV[8] -> on a one-node Redis the key prefix: the script then also
//	           drops or retains the job's global entries (onenode.go);
//	           "" on a Cluster, where the caller does that after
//	           (indexEnded)
//	ARGV[9] -> the nonce of a retained claim (one node)
//	Returns: {"OK", record as it was} or {"NOTRESERVED"}
var deleteScript = newScript(`
local seq, j, raw = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
local finished = ARGV[3] ~= '' and held(j, ARGV[3])
if ARGV[4] ~= '1' then
  if ARGV[3] ~= '' then
    if not finished then return {'NOTRESERVED'} end
  elseif j.state == 'reserved' then return {'NOTRESERVED'} end
end
local rec = raw or pack(j)
unplace(seq, j)
if j.ix then redis.call('HDEL', K_IDS, j.id) end
local keep = ARGV[6] + 0
local prefix = ARGV[8]
-- A job whose id the server made has no claim (its id carries its seq).
local claimKey
if prefix ~= '' and j.claim then claimKey = prefix .. ':id:{' .. j.id .. '}' end
if keep <= 0 then
  redis.call('DEL', K_JOB .. seq)
  if prefix ~= '' then
    if claimKey and redis.call('GET', claimKey) == j.claim then redis.call('DEL', claimKey) end
    redis.call('HDEL', (shardKeys(prefix, seq)), seq)
  end
  return {'OK', rec}
end
-- On one node one command reads the topic's clock and the id's claim.
local v
if claimKey then v = redis.call('MGET', K_NOW, claimKey) else v = {redis.call('GET', K_NOW)} end
local now, nowS = clockAt(v[1], ARGV[5])
if finished then hend(j, nowS, 'finished', '') else hend(j, nowS, 'deleted', '') end
if finished then j.state = 'finished'
elseif j.state == 'buried' then j.state = 'failed'
else j.state = 'deleted' end
clear(j)
j.ended = nowS
-- The record is written anew, one string with the retention as its TTL,
-- without what a retained job no longer needs (its claim, the body
-- unless kept).
local claim = j.claim
j.claim = nil
j.ix = nil
if ARGV[7] ~= '1' then j.body = nil end
-- TTLs and scores go to Redis as the strings ARGV gave (a Lua number
-- is formatted with sprintf on every call).
local px = ARGV[6]
redis.call('SET', K_JOB .. seq, pack(j), 'PX', px)
local idx = K_ENDED[j.state]
redis.call('ZADD', idx, nowS, pad(seq))
-- Trimmed on one delete in trimEvery (by seq), not on each: readers skip
-- members older than the window anyway (listRetainedScript).
local trim = seq % ` + trimEvery + ` == 0
if prefix == '' then
  -- A Cluster's topic script cannot reach the global keys: the seq's
  -- entry stays in its shard, and only the sweep trims the index, with
  -- the entries (trimEndedCluster): a trim here would leave them. An
  -- index an earlier build gave a TTL would drop members whose entries
  -- nothing then removes: the TTL is taken off.
  if trim then redis.call('PERSIST', idx) end
  -- the id's claim (another slot) cannot name the seq; an id without
  -- one carries it (its seq's shard entry names the topic)
  if claim then redis.call('SET', K_RET .. j.id, seq, 'PX', px) end
else
  -- One node: the seq's entry stays in its shard and the index has no
  -- TTL; the index's trim drops the entries of the members it trims
  -- (trimEnded), so a retained job costs no key of its own and no
  -- rewrite of its entry. The retained claim names the seq, so a read
  -- by id finds the job through it.
  if trim then trimEnded(prefix, idx, fmt(now - keep)) end
  if claimKey and v[2] == claim then
    redis.call('SET', claimKey, j.topic .. '|0|' .. ARGV[9] .. '|' .. seq, 'PX', px)
  end
end
return {'OK', rec}
`)

// Delete implements store.Store. Concurrent calls are written in groups
// (finish.go). On one node the script also drops or retains the job's
// global entries; on a Cluster they are another slot's, written after
// the script (indexEnded): the id claim (compare-and-delete) is dropped,
// or for a retained job given the retention as its TTL, and the seq's
// entry is dropped unless the job is retained (the sweep drops it then);
// if that fails they dangle harmlessly (docs/redis.md).
func (s *Store) Delete(ctx context.Context, p store.DeleteParams) (*delayq.Job, error) {
	t, err := s.resolve(ctx, p.Ref)
	if err != nil {
		return nil, err
	}
	j, err := s.deleteAt(ctx, t, p)
	if t.bySeq && errors.Is(err, delayq.ErrNotFound) {
		// not the job whose seq the id carries: by its claim
		if t, err = s.resolveClaim(ctx, p.Ref); err != nil {
			return nil, err
		}
		j, err = s.deleteAt(ctx, t, p)
	}
	return j, err
}

// deleteAt is Delete of the job at t, through the line of finishes.
func (s *Store) deleteAt(ctx context.Context, t target, p store.DeleteParams) (*delayq.Job, error) {
	c := &finishCall{t: t, res: p.Ref.Reservation, force: p.Force, now: msString(p.Now), ref: p.Ref}
	if err := s.finishLine().Do(ctx, c); err != nil {
		return nil, fmt.Errorf("redisstore: delete %s: %w", p.Ref, err)
	}
	if c.err != nil {
		return nil, c.err
	}
	return c.rec.job, nil
}

// DeleteBatch implements store.Store. The jobs of a batch may live in
// different hash slots, so no one script can take them all: each delete
// is its own atomic script, run in order, and an entry that meets an
// outage fails alone with ErrUnavailable (the contract's allowance for
// stores that cannot make a batch one write).
func (s *Store) DeleteBatch(ctx context.Context, ps []store.DeleteParams) ([]*delayq.Job, []error, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	jobs, errs := make([]*delayq.Job, len(ps)), make([]error, len(ps))
	for i, p := range ps {
		jobs[i], errs[i] = s.Delete(ctx, p)
	}
	return jobs, errs, nil
}

// updateScript changes a job that is not reserved.
//
//	ARGV[3] -> now (unix ms)
//	ARGV[4] -> new due (unix ms), or "" to keep it
//	ARGV[5] -> delay (ms) recorded with a new due
//	ARGV[6] -> "1" when ARGV[7] is a new body
//	ARGV[7] -> body
//	ARGV[8] -> new priority, or "" to keep it
//	ARGV[9] -> this instance's id (its own waiting mark does not count)
//	Returns: {"OK", record, woke} or {"NOTRESERVED"}; woke is 0 when
//	         the due was kept (the job did not move)
var updateScript = newScript(wokeLua + `
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if j.state == 'reserved' then return {'NOTRESERVED'} end
unplace(seq, j)
if ARGV[6] == '1' then j.body = ARGV[7] end
if ARGV[8] ~= '' then j.pri = ARGV[8] end
if ARGV[4] ~= '' then
  j.due = ARGV[4]; j.delay = ARGV[5]
  if tonumber(j.due) > clock(ARGV[3]) then j.state = 'delayed' else j.state = 'ready' end
end
place(seq, j)
local w = 0
if ARGV[4] ~= '' then w = woke(j, ARGV[9]) end
return {'OK', save(seq, j), w}
`)

// Update implements store.Store.
func (s *Store) Update(ctx context.Context, p store.UpdateParams) (*delayq.Job, error) {
	due, hasBody := "", "0"
	if p.Due != nil {
		due = msString(*p.Due)
	}
	if p.Body != nil {
		hasBody = "1"
	}
	r, err := s.runJob(ctx, "update", updateScript, p.Ref, msString(p.Now), due,
		strconv.FormatInt(p.Delay.Milliseconds(), 10), hasBody, string(p.Body), priArg(p.Priority), s.opt.InstanceID)
	if err != nil {
		return nil, err
	}
	if p.Due != nil {
		s.afterMove(ctx, r)
	}
	return r.job, nil
}

// pauseScript pauses a topic until a time, or resumes it.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> until (unix ms), or "" to resume
//	ARGV[2]    -> this instance's id (its own waiting mark does not count)
//	Returns:   1 when a resume ended a pause and another instance waits
//	           on the topic (waitedLua): its waiters are to be woken;
//	           else 0
var pauseScript = newScript(waitedLua + `
if ARGV[1] ~= '' then
  redis.call('SET', K_PAUSE, ARGV[1])
  return 0
end
if redis.call('DEL', K_PAUSE) == 1 and waited(K_B .. 'waiting', ARGV[2]) then return 1 end
return 0
`)

// Pause implements store.Store: the topic into the registry, then the
// pause written (or ended) by one script, which also tells whether a
// resume has another instance's waiters to wake.
func (s *Store) Pause(ctx context.Context, p store.PauseParams) error {
	if err := s.check(); err != nil {
		return err
	}
	until := ""
	if !p.Until.IsZero() {
		until = msString(p.Until)
	}
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	var woke int64
	err := s.acked(ctx, "pause", func(c rueidis.Client) error {
		if err := c.Do(ctx, c.B().Sadd().Key(s.k.topics()).Member(p.Topic).Build()).Error(); err != nil {
			return unavailable("pause", err)
		}
		var err error
		woke, err = pauseScript.Exec(ctx, c, s.k.topic(p.Topic).slice(), []string{until, s.opt.InstanceID}).AsInt64()
		if !start.IsZero() {
			s.Committed(start)
		}
		if err != nil {
			return unavailable("pause", err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if woke == 1 {
		s.publish(ctx, event{topic: p.Topic, count: 1})
	}
	return nil
}
