package redisstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// getScript reads one job: a live one, else a retained one visible at now.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> "i" (by id) or "s" (by seq)
//	ARGV[2]    -> the id or seq
//	ARGV[3]    -> now (unix ms), by the retention's clock
//	ARGV[4]    -> the retention (ms); "0" shows no retained job
//	Returns:   {"OK", record} or {"NOTFOUND"}
var getScript = newReadScript(`
local seq = find(ARGV[1], ARGV[2])
local keep = tonumber(ARGV[4])
if not seq and keep > 0 then seq = findRetained(ARGV[1], ARGV[2], tonumber(ARGV[3]), keep) end
if not seq then return {'NOTFOUND'} end
return {'OK', reply(seq)}
`)

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, ref delayq.Ref) (*delayq.Job, error) {
	now, keep := s.retainedView()
	r, err := s.runJob(ctx, "get", getScript, ref, now, keep)
	return r.job, err
}

// retainedView is the now (by the retention's clock) and retention (ms)
// that decide which retained jobs a read shows.
func (s *Store) retainedView() (now, keep string) {
	k := max(s.opt.Retention.For.Milliseconds(), 0)
	if k == 0 {
		return "0", "0"
	}
	return msString(s.opt.Retention.Clock()()), strconv.FormatInt(k, 10)
}

// listScript pages through one state of a topic, after a cursor.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> state rank: 0 ready, 1 delayed, 2 reserved, 3 buried
//	ARGV[2]    -> cursor score ("" = from the start); for ready the priority
//	ARGV[3]    -> cursor seq, zero-padded to 20 digits
//	ARGV[4]    -> most jobs to return
//	Returns:   {record, ...} in the state's order, after the cursor
var listScript = newReadScript(`
local rank, at, after, limit = tonumber(ARGV[1]), ARGV[2], ARGV[3], tonumber(ARGV[4])
local out = {}
if rank == 0 then
  local from = '-'
  if at ~= '' then from = '(' .. string.format('%010d', tonumber(at)) .. after end
  for _, m in ipairs(redis.call('ZRANGE', K_READY, from, '+', 'BYLEX', 'LIMIT', 0, limit)) do
    local rec = reply(unpad(string.sub(m, 11)))
    if rec then out[#out + 1] = rec end
  end
  return out
end
local key = ({K_DELAYED, K_RESERVED, K_BURIED})[rank]
local min = '-inf'
if at ~= '' then min = at end
local off = 0
while #out < limit do
  local page = redis.call('ZRANGE', key, min, '+inf', 'BYSCORE', 'WITHSCORES', 'LIMIT', off, 100)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    if #out >= limit then break end
    if at == '' or tonumber(page[i + 1]) > tonumber(at) or page[i] > after then
      local rec = reply(unpad(page[i]))
      if rec then out[#out + 1] = rec end
    end
  end
  off = off + 100
end
return out
`)

// listRetainedScript pages through a topic's retained jobs of one state,
// by ended then seq, after a cursor. Members older than the window (the
// delete script trims them on its next write) or whose record Redis has
// expired are skipped.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> the retained state (finished, deleted, failed)
//	ARGV[2]    -> cursor ended ("" = from the start)
//	ARGV[3]    -> cursor seq, zero-padded to 20 digits
//	ARGV[4]    -> most jobs to return
//	ARGV[5]    -> now (unix ms), by the retention's clock
//	ARGV[6]    -> the retention (ms)
//	Returns:   {record, ...}
var listRetainedScript = newReadScript(`
local key = K_ENDED[ARGV[1]]
local at, after, limit = ARGV[2], ARGV[3], tonumber(ARGV[4])
local keep = tonumber(ARGV[6])
local out = {}
if not key or keep <= 0 then return out end
local floor = tonumber(ARGV[5]) - keep
local min = '(' .. fmt(floor)
if at ~= '' and tonumber(at) > floor then min = at end
local off = 0
while #out < limit do
  local page = redis.call('ZRANGE', key, min, '+inf', 'BYSCORE', 'WITHSCORES', 'LIMIT', off, 100)
  if #page == 0 then break end
  for i = 1, #page, 2 do
    if #out >= limit then break end
    if at == '' or tonumber(page[i + 1]) > tonumber(at) or page[i] > after then
      local rec = reply(unpad(page[i]))
      if rec then out[#out + 1] = rec end
    end
  end
  off = off + 100
end
return out
`)

var stateRanks = []delayq.State{delayq.StateReady, delayq.StateDelayed, delayq.StateReserved, delayq.StateBuried,
	delayq.StateFinished, delayq.StateDeleted, delayq.StateFailed}

// liveRanks is how many of stateRanks are live states (List without a
// State lists those).
const liveRanks = 4

// listRetained is List of a retained state: one script, by ended then seq.
func (s *Store) listRetained(ctx context.Context, p store.ListParams, cur cursor, want int) (*store.ListResult, error) {
	res := &store.ListResult{Jobs: []*delayq.Job{}}
	at, after := "", ""
	if p.Cursor != "" {
		if stateRanks[cur.rank] != p.State {
			return res, nil // a cursor of another state: nothing after it here
		}
		at, after = strconv.FormatInt(cur.at, 10), fmt.Sprintf("%020d", cur.seq)
	}
	now, keep := s.retainedView()
	lim := min(want+1, 10000)
	arr, err := s.exec(ctx, "list", listRetainedScript, p.Topic, []string{string(p.State), at, after, strconv.Itoa(lim), now, keep})
	if err != nil {
		return nil, err
	}
	if res.Jobs, err = appendJobs(res.Jobs, arr); err != nil {
		return nil, err
	}
	if len(res.Jobs) > want {
		res.Jobs = res.Jobs[:want]
		res.Next = cursorOf(res.Jobs[want-1])
	}
	return res, nil
}

// List implements store.Store. The cursor is "rank/score/seq" of the last
// job shown, so a page resumes after it even if that job has since moved.
func (s *Store) List(ctx context.Context, p store.ListParams) (*store.ListResult, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	cur, err := parseCursor(p.Cursor)
	if err != nil {
		return nil, err
	}
	res := &store.ListResult{Jobs: []*delayq.Job{}}
	want := p.Limit
	if want <= 0 {
		want = 1 << 30
	}
	if p.State.Retained() {
		return s.listRetained(ctx, p, cur, want)
	}
	for rank, st := range stateRanks[:liveRanks] {
		if (p.State != "" && st != p.State) || rank < cur.rank || len(res.Jobs) > want {
			continue
		}
		at, after := "", ""
		if rank == cur.rank && p.Cursor != "" {
			at, after = strconv.FormatInt(cur.at, 10), fmt.Sprintf("%020d", cur.seq)
		}
		lim := min(want+1-len(res.Jobs), 10000)
		arr, err := s.exec(ctx, "list", listScript, p.Topic, []string{strconv.Itoa(rank), at, after, strconv.Itoa(lim)})
		if err != nil {
			return nil, err
		}
		if res.Jobs, err = appendJobs(res.Jobs, arr); err != nil {
			return nil, err
		}
	}
	if len(res.Jobs) > want {
		res.Jobs = res.Jobs[:want]
		res.Next = cursorOf(res.Jobs[want-1])
	}
	return res, nil
}

type cursor struct {
	rank int
	at   int64
	seq  uint64
}

func cursorOf(j *delayq.Job) string {
	rank := slices.Index(stateRanks, j.State)
	at := ms(j.Due)
	switch j.State {
	case delayq.StateReady:
		at = int64(j.Priority)
	case delayq.StateReserved:
		at = ms(j.Deadline)
	case delayq.StateFinished, delayq.StateDeleted, delayq.StateFailed:
		at = ms(j.Ended)
	}
	return fmt.Sprintf("%d/%d/%d", rank, at, j.Seq)
}

func parseCursor(s string) (cursor, error) {
	var c cursor
	if s == "" {
		return c, nil
	}
	parts := strings.Split(s, "/")
	bad := delayq.Invalid(delayq.CodeBadCursor, "cursor", "%q is not a cursor", s)
	if len(parts) != 3 {
		return c, bad
	}
	var errs [3]error
	c.rank, errs[0] = strconv.Atoi(parts[0])
	c.at, errs[1] = strconv.ParseInt(parts[1], 10, 64)
	c.seq, errs[2] = strconv.ParseUint(parts[2], 10, 64)
	for _, err := range errs {
		if err != nil || c.rank < 0 || c.rank >= len(stateRanks) {
			return c, bad
		}
	}
	return c, nil
}

// statsScript counts a topic's jobs.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	Returns:   {ready, delayed, reserved, buried, urgent, oldest ready due or "", pause end or ""}
var statsScript = newReadScript(`
local oldest = redis.call('ZRANGE', K_AGE, 0, 0, 'WITHSCORES')
local pause = redis.call('GET', K_PAUSE)
return {redis.call('ZCARD', K_READY), redis.call('ZCARD', K_DELAYED), redis.call('ZCARD', K_RESERVED),
  redis.call('ZCARD', K_BURIED), redis.call('ZLEXCOUNT', K_READY, '-', '(0000001024'),
  oldest[2] or '', pause or ''}
`)

// Topics implements store.Store. It reads the registry of topics ever
// used, then counts each in one pipeline; its cost grows with the number
// of topics, never with the number of jobs.
func (s *Store) Topics(ctx context.Context) ([]delayq.TopicStats, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	names, err := s.c.Do(ctx, s.c.B().Smembers().Key(s.k.topics()).Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("topics", err)
	}
	slices.Sort(names)
	execs := make([]rueidis.LuaExec, len(names))
	for i, t := range names {
		execs[i] = rueidis.LuaExec{Keys: s.k.topic(t).slice()}
	}
	out := []delayq.TopicStats{}
	for i, r := range execMulti(ctx, s.c, statsScript, execs) {
		arr, err := r.ToArray()
		if err != nil {
			return nil, unavailable("topics", err)
		}
		st := topicStats(names[i], arr)
		if st.Total() > 0 || !st.PausedUntil.IsZero() {
			out = append(out, st)
		}
	}
	return out, nil
}

// TopicStats implements store.TopicStater: one topic's stats, one script,
// whatever the number of topics.
func (s *Store) TopicStats(ctx context.Context, topic string) (delayq.TopicStats, error) {
	arr, err := s.exec(ctx, "topic stats", statsScript, topic, nil)
	if err != nil {
		return delayq.TopicStats{}, err
	}
	return topicStats(topic, arr), nil
}

func topicStats(name string, arr []rueidis.RedisMessage) delayq.TopicStats {
	n := func(i int) int { v, _ := arr[i].AsInt64(); return int(v) }
	t := func(i int) int64 {
		v, _ := arr[i].ToString()
		f, _ := strconv.ParseFloat(v, 64)
		return int64(f)
	}
	return delayq.TopicStats{
		Name: name, Ready: n(0), Delayed: n(1), Reserved: n(2), Buried: n(3), Urgent: n(4),
		OldestReady: fromMS(t(5)), PausedUntil: fromMS(t(6)),
	}
}

// appendJobs decodes the job records a list script returned onto jobs.
func appendJobs(jobs []*delayq.Job, arr []rueidis.RedisMessage) ([]*delayq.Job, error) {
	for _, m := range arr {
		r, err := decodeJob(m)
		if err != nil {
			return nil, unavailable("list: decode", err)
		}
		jobs = append(jobs, r.job)
	}
	return jobs, nil
}
