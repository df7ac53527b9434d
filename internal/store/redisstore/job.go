package redisstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
)

// prelude is prepended to every per-topic script. It names the topic keys
// (see keys.go) and holds the helpers that keep a job record and its state
// index in step: place adds a job to the index of its state, unplace
// removes it; every transition is unplace, change, place, save.
//
// A job record is the string P:{t}:j:<seq>, a MessagePack map (packed.go)
// of the fields of jobFields, plus seq and claim, lreason and lfail once
// the job has failed, hist, hn and cur once it was reserved (its
// attempts, see hstart), ended once it is retained, and ix when its id is
// in K_IDS. Times are unix ms, durations ms, the empty string a zero
// time. Every value is a string. A field at its zero may be missing
// (jobFields), and reads as zero.
const prelude = `
-- KEYS[1] is the topic's key prefix P:{t}: (keys.go: topicKeys.slice);
-- each key is named from it only in the scripts that use it (link).
local K_B = KEYS[1]
local K_JOB = K_B .. 'j:'
local K_IDS = K_B .. 'ids'
local K_READY = K_B .. 'ready'
local K_AGE = K_B .. 'age'
local K_DELAYED = K_B .. 'delayed'
local K_RESERVED = K_B .. 'reserved'
local K_BURIED = K_B .. 'buried'
local K_PAUSE = K_B .. 'pause'
local K_NOW = K_B .. 'now'
local K_RET = K_B .. 'r:'
local K_ENDED = {finished = K_B .. 'finished', deleted = K_B .. 'deleted', failed = K_B .. 'failed'}
-- clock returns the time to act at: ARGV's now, or the latest now the
-- topic was acted at if that is later (the contract's "Now never goes
-- back", kept per topic, across all instances).
--
-- A number the scripts wrote or were given is read with "+ 0", not
-- tonumber: Lua 5.1's tonumber is a C call that parses the string twice
-- (lua_isnumber, then lua_tonumber, each a strtod), the arithmetic once
-- and inline; the record's counts, times and durations were about 13
-- tonumber calls and 4% of the Redis instructions of a reserve+delete
-- (issue 31).
local function clock(n)
  n = n + 0
  local last = redis.call('GET', K_NOW)
  if last then
    last = last + 0
    if last >= n then return last end
  end
  redis.call('SET', K_NOW, string.format('%d', n))
  return n
end
-- clockAt is clock for a script that read the topic's latest now itself
-- (last, false if none; one MGET with another key saves a command): it
-- returns the time to act at as a number and as a string, s being the
-- caller's now in unix ms as ARGV gave it (so no number is formatted).
local function clockAt(last, s)
  local n = s + 0
  if last then
    local l = last + 0
    if l >= n then return l, last end
  end
  redis.call('SET', K_NOW, s)
  return n, s
end
local function clockRead(n)
  n = n + 0
  local last = redis.call('GET', K_NOW)
  if last then
    last = last + 0
    if last > n then return last end
  end
  return n
end
local function pad(seq) return string.rep('0', 20 - #seq) .. seq end
local function unpad(m) return (string.gsub(m, '^0+', '')) end
local function rmember(pri, seq) return string.format('%010d', pri) .. pad(seq) end
local function fmt(n) return string.format('%d', n) end
-- callIn sends cmd (with key, unless nil) and the pairs of w as one
-- variadic command, 2,000 pairs a call at most (Lua's unpack takes some
-- 8,000 values; a put may hold delayq.MaxBatch jobs). A command called
-- from Lua costs Redis some 5,000 instructions besides its own work
-- (its arguments' conversion, the call, its AOF entry): a script that
-- writes many jobs sends one per key, not one per job.
local function callIn(cmd, key, w)
  for i = 1, #w, 4000 do
    local j = math.min(i + 3999, #w)
    if key then redis.call(cmd, key, unpack(w, i, j)) else redis.call(cmd, unpack(w, i, j)) end
  end
end
-- gather adds the pair a, b to the list of cmds[key], for callIn; cmds
-- also lists its keys, in the order they came.
local function gather(cmds, key, a, b)
  local w = cmds[key]
  if not w then w = {}; cmds[key] = w; cmds[#cmds + 1] = key end
  w[#w + 1] = a
  w[#w + 1] = b
end
-- load reads a job record: a MessagePack string (layout 2, packed.go),
-- or the hash an older delayq wrote (layout 1), read as it is; the next
-- save writes it as a string (SET replaces a key of any type). A layout 1
-- job's id is in K_IDS, which ix remembers (a layout 2 job put on one
-- node is found through its claim, which names its seq: onenode.go).
-- The second result is the string as stored (none for a layout 1 hash).
local function load(seq)
  local raw = redis.pcall('GET', K_JOB .. seq)
  if not raw then return nil end
  if type(raw) == 'table' then
    local kv = redis.call('HGETALL', K_JOB .. seq)
    if #kv == 0 then return nil end
    local j = {}
    for i = 1, #kv, 2 do j[kv[i]] = kv[i + 1] end
    if not j.ended then j.ix = '1' end
    return j
  end
  return cmsgpack.unpack(raw), raw
end
local function pack(j) return cmsgpack.pack(j) end
local function place(seq, j)
  local m = pad(seq)
  if j.state == 'ready' then
    redis.call('ZADD', K_READY, '0', rmember(j.pri, seq))
    redis.call('ZADD', K_AGE, j.due, m)
  elseif j.state == 'delayed' then redis.call('ZADD', K_DELAYED, j.due, m)
  elseif j.state == 'reserved' then redis.call('ZADD', K_RESERVED, j.deadline, m)
  else redis.call('ZADD', K_BURIED, j.due, m) end
end
-- gatherPlace gathers a new job's index entries into zadds for callIn:
-- what place writes, from placeArgs' state, score and member.
local function gatherPlace(zadds, state, score, m)
  if state == 'ready' then
    gather(zadds, K_READY, '0', m)
    gather(zadds, K_AGE, score, string.sub(m, 11))
  elseif state == 'delayed' then gather(zadds, K_DELAYED, score, m)
  elseif state == 'reserved' then gather(zadds, K_RESERVED, score, m)
  else gather(zadds, K_BURIED, score, m) end
end
local function unplace(seq, j)
  local m = pad(seq)
  if j.state == 'ready' then
    redis.call('ZREM', K_READY, rmember(j.pri, seq))
    redis.call('ZREM', K_AGE, m)
  elseif j.state == 'delayed' then redis.call('ZREM', K_DELAYED, m)
  elseif j.state == 'reserved' then redis.call('ZREM', K_RESERVED, m)
  else redis.call('ZREM', K_BURIED, m) end
end
-- save writes a record and returns it packed.
local function save(seq, j)
  local p = pack(j)
  redis.call('SET', K_JOB .. seq, p)
  return p
end
-- The job's attempts (delayq.Job.History), kept so that a transition
-- only appends to a string: 'cur' is the attempt in progress,
-- "<N>,<reserved>,<#by>:<by>" ('' or absent: none); 'hist' the ended
-- ones, oldest first, each "<#rec>:<rec>" where rec is the cur it was
-- plus ",<ended>,<outcome>,<reason>"; 'hn' how many 'hist' holds. A job
-- never reserved has none of the three.
local MAXHIST = 20
local function hstart(j, at, by)
  local n, h = (j.hn or 0) + 0, j.hist or ''
  while n + 1 > MAXHIST do
    local c = string.find(h, ':', 1, true)
    h = string.sub(h, c + 1 + string.sub(h, 1, c - 1))
    n = n - 1
  end
  if n > 0 then j.hist = h; j.hn = fmt(n) else j.hist = nil; j.hn = nil end
  j.cur = j.att .. ',' .. at .. ',' .. #by .. ':' .. by
end
local function hend(j, at, how, reason)
  if not j.cur or j.cur == '' then return end
  local rec = j.cur .. ',' .. at .. ',' .. how .. ',' .. reason
  j.hist = (j.hist or '') .. #rec .. ':' .. rec
  j.hn = fmt((j.hn or 0) + 1)
  j.cur = nil
end
-- hreserved is when the attempt in progress began ('' without one).
local function hreserved(j)
  if not j.cur or j.cur == '' then return '' end
  return string.match(j.cur, '^%d+,(%d+),')
end
-- failed records why and when a job last failed (a job that never failed
-- has neither field, so it costs no memory).
local function failed(j, reason, at) j.lreason = reason; j.lfail = at end
-- A field at its zero is left out of the record (jobFields): a missing
-- count reads as 0, a missing time or reservation as none.
local function incr(j, f) j[f] = fmt((j[f] or 0) + 1) end
local function clear(j) j.res = nil; j.deadline = nil end
local function spent(j)
  local max = (j.maxatt or 0) + 0
  return max > 0 and (j.att or 0) + 0 >= max
end
local function bury(j, at) j.state = 'buried'; j.due = at; incr(j, 'bur') end
-- locate turns a job reference into a seq and the id it must carry:
-- mode 'i' an id (its seq from K_IDS), 's' a seq, 'p' "<seq>|<id>" (the
-- seq a one-node claim names, or the one an id the server made carries:
-- freshid.go; checked against the record's id).
local function locate(mode, ref)
  if mode == 'i' then return redis.call('HGET', K_IDS, ref), ref end
  if mode == 'p' then
    local c = string.find(ref, '|', 1, true)
    if not c then return nil end
    return string.sub(ref, 1, c - 1), string.sub(ref, c + 1)
  end
  return ref, nil
end
local function find(mode, ref)
  local seq, id = locate(mode, ref)
  if not seq then return nil end
  local j, raw = load(seq)
  -- a retained job (it has ended) is no live job: no transition sees it
  if not j or j.ended or (id and j.id ~= id) then return nil end
  return seq, j, raw
end
-- findRetained finds a retained job that is visible at now (unix ms)
-- under a retention of keep ms: it ended less than keep ago. By id on a
-- Cluster its seq is K_RET's; on one node the retained claim names it;
-- an id the server made carries it (mode 'p').
local function findRetained(mode, ref, now, keep)
  local seq, id
  if mode == 'i' then
    seq, id = redis.call('GET', K_RET .. ref), ref
  else
    seq, id = locate(mode, ref)
  end
  if not seq then return nil end
  local j = load(seq)
  if not j or not j.ended or j.ended + keep <= now or (id and j.id ~= id) then return nil end
  return seq, j
end
local function held(j, res) return j.state == 'reserved' and res ~= '' and j.res == res end
-- reply is a record as stored: a packed string, or a layout 1 hash's
-- field/value pairs; false when there is none.
local function reply(seq)
  local raw = redis.pcall('GET', K_JOB .. seq)
  if type(raw) == 'table' then
    local kv = redis.call('HGETALL', K_JOB .. seq)
    if #kv == 0 then return false end
    return kv
  end
  return raw
end
-- shardKeys are the global seq -> topic keys of seq under prefix (keys.go:
-- seqShard, retainedSeq); only one-node scripts name keys (onenode.go).
local function shardKeys(prefix, seq)
  local sh = prefix .. ':seqs:{' .. string.format('%d', math.floor(seq / 4096)) .. '}'
  return sh, sh .. ':r:' .. seq
end
-- trimEnded drops from a one-node ended index (K_ENDED) the members
-- that ended at or before cutoff (unix ms, a string), at most 256 a
-- call, with their seq -> topic entries: on one node a retained job
-- keeps its entry in its seq's shard (no key of its own), and the index
-- has no TTL, so its trim is what removes both (deleteScript; the sweep
-- trims too, so a topic that stops ending jobs is trimmed all the same).
-- A TTL an earlier build gave the index is taken away, or it would
-- drop members whose entries nothing then removes. Returns how many
-- members it dropped.
local function trimEnded(prefix, idx, cutoff)
  redis.call('PERSIST', idx)
  local old = redis.call('ZRANGE', idx, '-inf', cutoff, 'BYSCORE', 'LIMIT', '0', '256')
  if #old == 0 then return 0 end
  local fields, order = {}, {}
  for _, m in ipairs(old) do
    local seq = unpad(m)
    local sh = shardKeys(prefix, seq)
    if not fields[sh] then fields[sh] = {}; order[#order + 1] = sh end
    local f = fields[sh]
    f[#f + 1] = seq
  end
  for _, sh in ipairs(order) do redis.call('HDEL', sh, unpack(fields[sh])) end
  redis.call('ZREM', idx, unpack(old))
  return #old
end
local function earliest()
  local a = redis.call('ZRANGE', K_DELAYED, 0, 0, 'WITHSCORES')
  local b = redis.call('ZRANGE', K_RESERVED, 0, 0, 'WITHSCORES')
  if #a == 0 and #b == 0 then return '' end
  if #a == 0 then return b[2] end
  if #b == 0 or a[2] + 0 <= b[2] + 0 then return a[2] end
  return b[2]
end
-- serverMS is the Redis server's own clock (TIME) in unix ms, by which
-- the waiting marks are written and read (notify.go): on a Cluster the
-- topic's master is their one clock, and the instances' never enter.
local function serverMS()
  local t = redis.call('TIME')
  return t[1] * 1000 + math.floor(t[2] / 1000)
end
`

// newScript returns a per-topic script: the parts of prelude it uses,
// then body.
func newScript(body string) *rueidis.Lua { return rueidis.NewLuaScript(link(body)) }

// newReadScript is newScript for scripts that change nothing (they may run
// on replicas).
func newReadScript(body string) *rueidis.Lua { return rueidis.NewLuaScriptReadOnly(link(body)) }

// preludePart is one definition of prelude (with the comment above it),
// the names it defines and the names its code uses.
type preludePart struct {
	names []string
	uses  map[string]bool
	code  string
}

var (
	preludeParts = splitPrelude(prelude)
	// localDef matches a line that starts a definition: "local function
	// name" or "local a, b = ...".
	localDef = regexp.MustCompile(`^local (?:function (\w+)|(\w+(?:, \w+)*) =)`)
	// luaComment is a Lua line comment (the scripts have no "--" in strings).
	luaComment = regexp.MustCompile(`--[^\n]*`)
)

// splitPrelude cuts prelude into its definitions.
func splitPrelude(src string) []preludePart {
	var parts []preludePart
	var pending []string // comment lines, for the next definition
	for _, line := range strings.Split(src, "\n") {
		m := localDef.FindStringSubmatch(line)
		switch {
		case m != nil:
			names := m[1]
			if names == "" {
				names = m[2]
			}
			p := preludePart{names: strings.Split(names, ", ")}
			p.code = strings.Join(append(pending, line), "\n") + "\n"
			pending = nil
			parts = append(parts, p)
		case strings.HasPrefix(line, "--"):
			pending = append(pending, line)
		case len(parts) > 0 && line != "":
			parts[len(parts)-1].code += line + "\n"
		}
	}
	for i := range parts {
		parts[i].uses = usedNames(parts[i].code)
	}
	return parts
}

// usedNames is the set of names src uses: every run of word characters
// that is not a field or method of that name (string.find), with the
// comments left out (a name in a comment is no use).
func usedNames(src string) map[string]bool {
	src = luaComment.ReplaceAllString(src, "")
	word := func(c byte) bool {
		return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
	}
	used := map[string]bool{}
	for i := 0; i < len(src); {
		if !word(src[i]) {
			i++
			continue
		}
		j := i
		for j < len(src) && word(src[j]) {
			j++
		}
		if i == 0 || src[i-1] != '.' {
			used[src[i:j]] = true
		}
		i = j
	}
	return used
}

// link is body behind the definitions of prelude it uses, directly or
// through other definitions, in prelude's order. Every script runs its
// whole text on every call, and each "local function" is a closure made
// and collected again each time: with the whole prelude in front, the
// one-node put script spent about 20 µs of its 50 on helpers it never
// called (issue 31, measured with redis-benchmark).
//
// It runs in the package's init, once per script, so in every process
// that links this package (each delayq command, each test binary): it
// looks each definition's names up in sets made once, never matching a
// pattern per name against the text, which made the init take 0.25 s of
// CPU, and 3 to 4 s under -race, at every start.
func link(body string) string {
	used := make([]bool, len(preludeParts))
	pending := []map[string]bool{usedNames(body)} // uses not yet looked up
	for len(pending) > 0 {
		uses := pending[len(pending)-1]
		pending = pending[:len(pending)-1]
		for i, p := range preludeParts {
			if !used[i] && slices.ContainsFunc(p.names, func(n string) bool { return uses[n] }) {
				used[i] = true
				pending = append(pending, p.uses)
			}
		}
	}
	var b strings.Builder
	for i, p := range preludeParts {
		if used[i] {
			b.WriteString(p.code)
		}
	}
	b.WriteString(body)
	return b.String()
}

// jobFields encodes j as the field/value pairs of its record, without
// seq and claim (the put scripts add those). A field whose value is its
// zero (a count of 0, no reservation, deadline, delay or attempt limit)
// is left out, as the scripts leave it out when they set it back (nil
// in prelude's helpers): every field costs the scripts' cmsgpack unpack
// and pack on every transition, and a new job has nine such fields of
// 19 (issue 31). A missing field reads as its zero, in Go
// (decodeJob) and in Lua (prelude: incr, spent, hstart). The id, topic,
// body, priority, TTR, state, due and creation time are always there.
func jobFields(j *delayq.Job) []string {
	f := []string{
		"id", j.ID, "topic", j.Topic, "body", string(j.Body),
		"pri", strconv.FormatUint(uint64(j.Priority), 10), "ttr", strconv.FormatInt(j.TTR.Milliseconds(), 10),
		"state", string(j.State), "due", msString(j.Due), "created", msString(j.Created),
	}
	for _, c := range []struct {
		name string
		v    int64
	}{{"maxatt", int64(j.MaxAttempts)}, {"att", int64(j.Attempts)}, {"delay", j.Delay.Milliseconds()},
		{"tmo", int64(j.Timeouts)}, {"rel", int64(j.Releases)}, {"bur", int64(j.Buries)}, {"kck", int64(j.Kicks)}} {
		if c.v != 0 {
			f = append(f, c.name, strconv.FormatInt(c.v, 10))
		}
	}
	if j.Reservation != "" {
		f = append(f, "res", j.Reservation)
	}
	if !j.Deadline.IsZero() {
		f = append(f, "deadline", msString(j.Deadline))
	}
	if j.LastReason != "" || !j.LastFailed.IsZero() {
		f = append(f, "lreason", j.LastReason, "lfail", optMS(j.LastFailed))
	}
	return f
}

// placeArgs are what a put script (putOneScript, insertScript) needs of
// a job seq to index it, made here so the script formats nothing: its state, its index score
// (due; a reserved job's deadline) and member ("%010d(priority)%020d(seq)"
// for a ready job, whose age index member is the seq part; "%020d(seq)"
// else; keys.go).
func placeArgs(j *delayq.Job, seq uint64) []string {
	score := msString(j.Due)
	if j.State == delayq.StateReserved {
		score = msString(j.Deadline)
	}
	m := fmt.Sprintf("%020d", seq)
	if j.State == delayq.StateReady {
		m = fmt.Sprintf("%010d", j.Priority) + m
	}
	return []string{string(j.State), score, m}
}

// optMS is "" for the zero time, else unix ms.
func optMS(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return msString(t)
}

// record is a decoded job record plus the claim it was put under.
type record struct {
	job   *delayq.Job
	claim string
	// woke: the script that answered the record made the job ready and
	// found another instance waiting on its topic (wokeLua), so its
	// ready count is to be published (afterMove).
	woke bool
}

// decodeJob reads a job record as a script answers it: a packed string
// (layout 2), or a layout 1 hash's HGETALL pairs.
func decodeJob(m rueidis.RedisMessage) (record, error) {
	var kv []string
	var err error
	if m.IsString() {
		var b []byte
		if b, err = m.AsBytes(); err == nil {
			kv, err = unpackRecord(b)
		}
	} else {
		kv, err = m.AsStrSlice()
	}
	if err != nil {
		return record{}, err
	}
	if len(kv)%2 != 0 || len(kv) == 0 {
		return record{}, fmt.Errorf("malformed job record (%d fields)", len(kv))
	}
	j := &delayq.Job{}
	var r record
	var hist, cur string
	num := func(s string) int64 { v, _ := strconv.ParseInt(s, 10, 64); return v }
	for i := 0; i < len(kv); i += 2 {
		v := kv[i+1]
		switch kv[i] {
		case "id":
			j.ID = v
		case "seq":
			j.Seq, _ = strconv.ParseUint(v, 10, 64)
		case "topic":
			j.Topic = v
		case "body":
			j.Body = []byte(v)
		case "pri":
			j.Priority = uint32(num(v))
		case "ttr":
			j.TTR = time.Duration(num(v)) * time.Millisecond
		case "maxatt":
			j.MaxAttempts = int(num(v))
		case "att":
			j.Attempts = int(num(v))
		case "state":
			j.State = delayq.State(v)
		case "due":
			j.Due = fromMS(num(v))
		case "created":
			j.Created = fromMS(num(v))
		case "delay":
			j.Delay = time.Duration(num(v)) * time.Millisecond
		case "res":
			j.Reservation = v
		case "deadline":
			j.Deadline = fromMS(num(v))
		case "tmo":
			j.Timeouts = int(num(v))
		case "rel":
			j.Releases = int(num(v))
		case "bur":
			j.Buries = int(num(v))
		case "kck":
			j.Kicks = int(num(v))
		case "lreason":
			j.LastReason = v
		case "lfail":
			j.LastFailed = fromMS(num(v))
		case "claim":
			r.claim = v
		case "ended":
			j.Ended = fromMS(num(v))
		case "hist":
			hist = v
		case "cur":
			cur = v
		}
	}
	if hist != "" || cur != "" {
		h, err := decodeHistory(hist, cur)
		if err != nil {
			return record{}, fmt.Errorf("job %s: %w", j.ID, err)
		}
		j.History = h
	}
	r.job = j
	return r, nil
}

// decodeHistory reads the attempts of a record (see hstart in prelude):
// hist, the ended ones, then cur, the one in progress.
func decodeHistory(hist, cur string) ([]delayq.Attempt, error) {
	var out []delayq.Attempt
	for hist != "" {
		n, rest, ok := strings.Cut(hist, ":")
		size, err := strconv.Atoi(n)
		if !ok || err != nil || size < 0 || size > len(rest) {
			return nil, fmt.Errorf("malformed history %.40q", hist)
		}
		a, tail, err := decodeAttempt(rest[:size])
		if err != nil {
			return nil, err
		}
		// tail is ",<ended>,<outcome>,<reason>"
		parts := strings.SplitN(strings.TrimPrefix(tail, ","), ",", 3)
		if len(parts) != 3 || !strings.HasPrefix(tail, ",") {
			return nil, fmt.Errorf("malformed attempt %.40q", rest[:size])
		}
		ended, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("malformed attempt %.40q", rest[:size])
		}
		a.Ended, a.Outcome, a.Reason = fromMS(ended), delayq.Outcome(parts[1]), parts[2]
		out = append(out, a)
		hist = rest[size:]
	}
	if cur != "" {
		a, tail, err := decodeAttempt(cur)
		if err != nil || tail != "" {
			return nil, fmt.Errorf("malformed attempt %.40q", cur)
		}
		out = append(out, a)
	}
	return out, nil
}

// decodeAttempt reads "<N>,<reserved>,<#by>:<by>" from the start of s and
// returns what follows.
func decodeAttempt(s string) (delayq.Attempt, string, error) {
	bad := fmt.Errorf("malformed attempt %.40q", s)
	parts := strings.SplitN(s, ",", 3)
	if len(parts) != 3 {
		return delayq.Attempt{}, "", bad
	}
	n, err1 := strconv.Atoi(parts[0])
	at, err2 := strconv.ParseInt(parts[1], 10, 64)
	size, rest, ok := strings.Cut(parts[2], ":")
	byLen, err3 := strconv.Atoi(size)
	if err1 != nil || err2 != nil || err3 != nil || !ok || byLen < 0 || byLen > len(rest) {
		return delayq.Attempt{}, "", bad
	}
	return delayq.Attempt{N: n, Reserved: fromMS(at), By: rest[:byLen]}, rest[byLen:], nil
}

// target names a job inside its topic for a script: ARGV[1] is "i" (by
// id), "s" (by seq) or "p" ("<seq>|<id>": the seq, checked against the
// record's id), ARGV[2] the id, seq or "<seq>|<id>".
type target struct {
	topic string
	mode  string
	ref   string
	// bySeq: found through the seq the id carries (freshid.go); a job
	// not there may be a producer's id that carries a seq by chance,
	// found through its claim (resolveClaim).
	bySeq bool
}

// resolve finds the topic of ref through the global indexes. A stale index
// entry only points at a topic where the script then finds no such job.
// An id that carries a seq (freshid.go) is looked up by that seq first:
// a job found so that answers "not found" is to be looked up again by
// its claim (target.bySeq).
func (s *Store) resolve(ctx context.Context, ref delayq.Ref) (target, error) {
	if err := s.check(); err != nil {
		return target{}, err
	}
	switch {
	case ref.ID != "":
		if seq, ok := freshSeq(ref.ID); ok {
			topic, err := s.seqTopic(ctx, seq)
			if err == nil {
				return target{topic: topic, mode: "p", ref: freshRef(seq, ref.ID), bySeq: true}, nil
			}
			if !errors.Is(err, delayq.ErrNotFound) {
				return target{}, err
			}
		}
		return s.resolveClaim(ctx, ref)
	case ref.Seq != 0:
		topic, err := s.seqTopic(ctx, ref.Seq)
		if errors.Is(err, delayq.ErrNotFound) {
			return target{}, fmt.Errorf("redisstore: job %s: %w", ref, err)
		}
		if err != nil {
			return target{}, err
		}
		return target{topic: topic, mode: "s", ref: strconv.FormatUint(ref.Seq, 10)}, nil
	}
	return target{}, fmt.Errorf("redisstore: job %s: %w", ref, delayq.ErrNotFound)
}

// resolveClaim finds the topic of ref.ID through the id's claim.
func (s *Store) resolveClaim(ctx context.Context, ref delayq.Ref) (target, error) {
	v, err := s.c.Do(ctx, s.c.B().Get().Key(s.k.claim(ref.ID)).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		return target{}, fmt.Errorf("redisstore: job %s: %w", ref, delayq.ErrNotFound)
	}
	if err != nil {
		return target{}, unavailable("find job", err)
	}
	return claimTarget(v, ref.ID), nil
}

// seqTopic is the topic of the job seq: this instance's memory of the
// seqs it put or reserved, else the seq -> topic shard (where a
// retained job's entry stays too), else the key of its own an earlier
// build moved a retained job's entry to on a Cluster (retainedSeq),
// which this build still reads. ErrNotFound when none names it.
func (s *Store) seqTopic(ctx context.Context, seq uint64) (string, error) {
	if t, ok := s.topicOf.get(seq); ok {
		return t, nil
	}
	field := strconv.FormatUint(seq, 10)
	topic, err := s.c.Do(ctx, s.c.B().Hget().Key(s.k.seqShard(seq)).Field(field).Build()).ToString()
	if rueidis.IsRedisNil(err) {
		topic, err = s.c.Do(ctx, s.c.B().Get().Key(s.k.retainedSeq(seq)).Build()).ToString()
	}
	if rueidis.IsRedisNil(err) {
		return "", delayq.ErrNotFound
	}
	if err != nil {
		return "", unavailable("find job", err)
	}
	return topic, nil
}

// claimTarget is where the claim v of id points: by seq when it names
// one (a one-node put's claim, onenode.go), else by id in its topic.
func claimTarget(v, id string) target {
	topic, _, seq := claimParts(v)
	if seq != "" {
		return target{topic: topic, mode: "p", ref: seq + "|" + id}
	}
	return target{topic: topic, mode: "i", ref: id}
}

// runJob runs a job script for ref: ARGV = mode, ref, extra...; the script
// answers {status, record...}. It maps statuses to the delayq sentinels.
// A job not found by the seq its id carries is looked for by its claim.
func (s *Store) runJob(ctx context.Context, op string, script *rueidis.Lua, ref delayq.Ref, extra ...string) (record, error) {
	t, err := s.resolve(ctx, ref)
	if err != nil {
		return record{}, err
	}
	r, err := s.runJobAt(ctx, op, script, t, ref, extra)
	if t.bySeq && errors.Is(err, delayq.ErrNotFound) {
		if t, err = s.resolveClaim(ctx, ref); err != nil {
			return record{}, err
		}
		r, err = s.runJobAt(ctx, op, script, t, ref, extra)
	}
	return r, err
}

// runJobAt is runJob at the target t.
func (s *Store) runJobAt(ctx context.Context, op string, script *rueidis.Lua, t target, ref delayq.Ref, extra []string) (record, error) {
	args := append([]string{t.mode, t.ref}, extra...)
	arr, err := s.exec(ctx, op, script, t.topic, args)
	if err != nil {
		return record{}, err
	}
	if err := statusErr(op, ref, arr); err != nil {
		return record{}, err
	}
	if len(arr) < 2 {
		return record{}, fmt.Errorf("redisstore: %s: short reply", op)
	}
	r, err := decodeJob(arr[1])
	if err != nil {
		return record{}, fmt.Errorf("redisstore: %s: %w", op, err)
	}
	if len(arr) > 2 {
		n, _ := arr[2].AsInt64()
		r.woke = n == 1
	}
	return r, nil
}

// exec runs a per-topic script and returns its array reply.
func (s *Store) exec(ctx context.Context, op string, script *rueidis.Lua, topic string, args []string) ([]rueidis.RedisMessage, error) {
	return s.execKeys(ctx, op, script, s.k.topic(topic).slice(), args)
}

// execKeys is exec with the keys given: a topic's, and on a one-node
// Redis the global ones its script also writes (onenode.go). Its reply
// is nil when the script did not run; a script that ran but whose
// replicas did not confirm it (--redis-wait-replicas) returns its reply
// and that error.
func (s *Store) execKeys(ctx context.Context, op string, script *rueidis.Lua, keys, args []string) ([]rueidis.RedisMessage, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	var arr []rueidis.RedisMessage
	var serr error
	exec := func(c rueidis.Client) error {
		arr, serr = script.Exec(ctx, c, keys, args).ToArray()
		return serr
	}
	var err error
	if readOnlyOps[op] {
		err = exec(s.c)
	} else {
		err = s.acked(ctx, op, exec)
	}
	if serr != nil {
		return nil, unavailable(op, serr)
	}
	if err != nil {
		// The script ran (its reply is returned too); its replicas did
		// not confirm it.
		return arr, err
	}
	if !start.IsZero() {
		s.Committed(start)
	}
	return arr, nil
}

// readOnlyOps are the exec ops that change nothing a client is told of,
// so they never wait for replicas: reads, and the timer's tick (a tick a
// failover undoes is done again).
var readOnlyOps = map[string]bool{"get": true, "list": true, "topic stats": true, "tick": true, "reserve: peek": true}

// statusErr maps a script's status (its first reply element) to an error.
func statusErr(op string, ref delayq.Ref, arr []rueidis.RedisMessage) error {
	if len(arr) == 0 {
		return fmt.Errorf("redisstore: %s: empty reply", op)
	}
	st, _ := arr[0].ToString()
	switch st {
	case "OK":
		return nil
	case "NOTFOUND":
		return fmt.Errorf("redisstore: %s %s: %w", op, ref, delayq.ErrNotFound)
	case "NOTRESERVED":
		return fmt.Errorf("redisstore: %s %s: %w", op, ref, delayq.ErrNotReserved)
	case "STATE":
		return fmt.Errorf("redisstore: %s %s: %w", op, ref, delayq.ErrState)
	case "EXISTS":
		var id, state string
		if len(arr) > 2 {
			id, _ = arr[1].ToString()
			state, _ = arr[2].ToString()
		}
		return fmt.Errorf("redisstore: %s: %w", op, &delayq.ExistsError{ID: id, State: delayq.State(state)})
	}
	return fmt.Errorf("redisstore: %s: unexpected status %q", op, st)
}
