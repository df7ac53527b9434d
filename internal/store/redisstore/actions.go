package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Every script in this file takes a job reference first:
//
//	KEYS[1..9] -> the job's topic keys (keys.go)
//	ARGV[1]    -> "i" (by id) or "s" (by seq)
//	ARGV[2]    -> the id or seq
//
// and answers {"OK", record} or {status} (NOTFOUND, NOTRESERVED, STATE).

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
//	Returns: {"OK", record}
var releaseScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if not held(j, ARGV[3]) then return {'NOTRESERVED'} end
unplace(seq, j)
clear(j)
incr(j, 'rel')
j.delay = ARGV[6]
if ARGV[7] ~= '' then j.pri = ARGV[7] end
local now = clock(ARGV[4])
failed(j, ARGV[8], fmt(now))
if spent(j) then bury(j, fmt(now))
elseif tonumber(ARGV[5]) > now then j.state = 'delayed'; j.due = ARGV[5]
else j.state = 'ready'; j.due = ARGV[5] end
place(seq, j)
save(seq, j)
return {'OK', reply(seq)}
`)

// Release implements store.Store.
func (s *Store) Release(ctx context.Context, p store.ReleaseParams) (*delayq.Job, error) {
	due := ms(p.Due)
	r, err := s.runJob(ctx, "release", releaseScript, p.Ref, p.Ref.Reservation, msString(p.Now),
		strconv.FormatInt(due, 10), strconv.FormatInt(p.Delay.Milliseconds(), 10), priArg(p.Priority), p.Reason)
	if err != nil {
		return nil, err
	}
	s.afterMove(ctx, r.job)
	return r.job, nil
}

// afterMove marks the bucket and tells the other instances after a job
// went delayed (their timer) or ready (their waiters). A lost mark is
// repaired by the sweep; a lost event only costs latency.
func (s *Store) afterMove(ctx context.Context, j *delayq.Job) {
	switch j.State {
	case delayq.StateDelayed:
		if err := s.c.Do(ctx, s.markDue(j.Topic, ms(j.Due))).Error(); err != nil {
			s.log.Warn("redisstore: could not mark due time; the sweep will", "topic", j.Topic, "err", err)
		}
		s.publish(ctx, event{due: ms(j.Due)})
	case delayq.StateReady:
		s.publish(ctx, event{topic: j.Topic, count: 1})
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
save(seq, j)
return {'OK', reply(seq)}
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
bury(j, now)
place(seq, j)
save(seq, j)
return {'OK', reply(seq)}
`)

// Bury implements store.Store.
func (s *Store) Bury(ctx context.Context, p store.BuryParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "bury", buryScript, p.Ref, p.Ref.Reservation, msString(p.Now), priArg(p.Priority), p.Reason)
	return r.job, err
}

// kickJobScript moves one buried or delayed job to ready.
//
//	ARGV[3] -> now (unix ms)
//	Returns: {"OK", record} or {"STATE"}
var kickJobScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if j.state ~= 'buried' and j.state ~= 'delayed' then return {'STATE'} end
unplace(seq, j)
j.state = 'ready'; j.due = fmt(clock(ARGV[3])); incr(j, 'kck')
place(seq, j)
save(seq, j)
return {'OK', reply(seq)}
`)

// KickJob implements store.Store.
func (s *Store) KickJob(ctx context.Context, p store.KickJobParams) (*delayq.Job, error) {
	r, err := s.runJob(ctx, "kick", kickJobScript, p.Ref, msString(p.Now))
	if err != nil {
		return nil, err
	}
	s.afterMove(ctx, r.job)
	return r.job, nil
}

// kickScript kicks up to n jobs of a topic: buried ones if any, else
// delayed ones.
//
//	KEYS[1..9] -> the topic's keys
//	ARGV[1]    -> now (unix ms)
//	ARGV[2]    -> most jobs to kick
//	Returns:   how many moved
var kickScript = newScript(`
local now, max = ARGV[1], tonumber(ARGV[2])
local members = redis.call('ZRANGE', K_BURIED, 0, max - 1)
if #members == 0 then members = redis.call('ZRANGE', K_DELAYED, 0, max - 1) end
if #members > 0 then now = fmt(clock(now)) end
for _, m in ipairs(members) do
  local seq = unpad(m)
  local j = load(seq)
  unplace(seq, j)
  j.state = 'ready'; j.due = now; incr(j, 'kck')
  place(seq, j)
  save(seq, j)
end
return #members
`)

// Kick implements store.Store.
func (s *Store) Kick(ctx context.Context, p store.KickParams) (int, error) {
	if err := s.check(); err != nil {
		return 0, err
	}
	if p.Max <= 0 {
		return 0, nil
	}
	var n int64
	var serr error
	err := s.acked(ctx, "kick", func(c rueidis.Client) error {
		n, serr = kickScript.Exec(ctx, c, s.k.topic(p.Topic).slice(), []string{msString(p.Now), strconv.Itoa(p.Max)}).AsInt64()
		return serr
	})
	if serr != nil {
		return 0, unavailable("kick", serr)
	}
	if err != nil {
		return 0, err
	}
	if n > 0 {
		s.publish(ctx, event{topic: p.Topic, count: int(n)})
	}
	return int(n), nil
}

// deleteScript removes a job.
//
//	ARGV[3] -> reservation ("" for none)
//	ARGV[4] -> "1" to delete whatever the state (operator delete)
//	Returns: {"OK", record as it was} or {"NOTRESERVED"}
var deleteScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if ARGV[4] ~= '1' then
  if ARGV[3] ~= '' then
    if not held(j, ARGV[3]) then return {'NOTRESERVED'} end
  elseif j.state == 'reserved' then return {'NOTRESERVED'} end
end
local rec = reply(seq)
unplace(seq, j)
redis.call('HDEL', K_IDS, j.id)
redis.call('DEL', K_JOB .. seq)
return {'OK', rec}
`)

// Delete implements store.Store. After the script, the global entries of
// the job (its id claim, compare-and-delete; its seq) are dropped; if that
// fails they dangle harmlessly (docs/redis.md).
func (s *Store) Delete(ctx context.Context, p store.DeleteParams) (*delayq.Job, error) {
	force := "0"
	if p.Force {
		force = "1"
	}
	r, err := s.runJob(ctx, "delete", deleteScript, p.Ref, p.Ref.Reservation, force)
	if err != nil {
		return nil, err
	}
	s.unindex(ctx, r)
	return r.job, nil
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

// unindex drops a deleted job's global entries.
func (s *Store) unindex(ctx context.Context, r record) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
	defer cancel()
	s.unclaim(ctx, r.job.ID, r.claim)
	s.c.Do(ctx, s.c.B().Hdel().Key(s.k.seqShard(r.job.Seq)).Field(strconv.FormatUint(r.job.Seq, 10)).Build())
}

// updateScript changes a job that is not reserved.
//
//	ARGV[3] -> now (unix ms)
//	ARGV[4] -> new due (unix ms), or "" to keep it
//	ARGV[5] -> delay (ms) recorded with a new due
//	ARGV[6] -> "1" when ARGV[7] is a new body
//	ARGV[7] -> body
//	ARGV[8] -> new priority, or "" to keep it
//	Returns: {"OK", record} or {"NOTRESERVED"}
var updateScript = newScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq then return {'NOTFOUND'} end
if j.state == 'reserved' then return {'NOTRESERVED'} end
unplace(seq, j)
if ARGV[6] == '1' then redis.call('HSET', K_JOB .. seq, 'body', ARGV[7]) end
if ARGV[8] ~= '' then j.pri = ARGV[8] end
if ARGV[4] ~= '' then
  j.due = ARGV[4]; j.delay = ARGV[5]
  if tonumber(j.due) > clock(ARGV[3]) then j.state = 'delayed' else j.state = 'ready' end
end
place(seq, j)
save(seq, j)
return {'OK', reply(seq)}
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
		strconv.FormatInt(p.Delay.Milliseconds(), 10), hasBody, string(p.Body), priArg(p.Priority))
	if err != nil {
		return nil, err
	}
	if p.Due != nil {
		s.afterMove(ctx, r.job)
	}
	return r.job, nil
}

// Pause implements store.Store. One command, so atomic without a script.
func (s *Store) Pause(ctx context.Context, p store.PauseParams) error {
	if err := s.check(); err != nil {
		return err
	}
	key := s.k.topic(p.Topic).pauseKey()
	cmds := rueidis.Commands{s.c.B().Sadd().Key(s.k.topics()).Member(p.Topic).Build()}
	if p.Until.IsZero() {
		cmds = append(cmds, s.c.B().Del().Key(key).Build())
	} else {
		cmds = append(cmds, s.c.B().Set().Key(key).Value(msString(p.Until)).Build())
	}
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	err := s.acked(ctx, "pause", func(c rueidis.Client) error {
		rs := c.DoMulti(ctx, cmds...)
		if !start.IsZero() {
			s.Committed(start)
		}
		for _, r := range rs {
			if err := r.Error(); err != nil {
				return unavailable("pause", err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if p.Until.IsZero() {
		s.publish(ctx, event{topic: p.Topic, count: 1})
	}
	return nil
}
