package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
)

// staleClaim is how old an id claim must be before a put may take it over
// when its job is not in the claimed topic (the put that made it died
// between claim and insert). A put that needs longer than half of it
// between claim and insert gives up, so a slow put and a takeover cannot
// both insert.
const staleClaim = 10 * time.Second

// Put implements store.Store. Per job it claims the id (global, one key per
// id), then takes seqs, records seq -> topic, marks the topic's timer
// bucket, and finally inserts the jobs of each topic with one script, the
// source of truth. Every step before the insert only leaves entries that
// readers verify against the topic, so a crash in between loses nothing
// acknowledged and corrupts nothing. Jobs of one topic go through the
// put line (putInLine): on one node as one script (onenode.go), on a
// Cluster the same steps for a whole group (clusterput.go).
func (s *Store) Put(ctx context.Context, jobs []*delayq.Job) error {
	if done, err := s.putFirst(ctx, jobs, false); done {
		return err
	}
	start := time.Now()
	claims, err := s.claimAll(ctx, jobs)
	if err != nil {
		return err
	}
	inserted, waited, err := s.insert(ctx, jobs, claims, start)
	if err != nil {
		// Keep the claims of topics whose insert ran or may have run (its
		// reply was lost): those jobs may be live, and a live job without
		// its claim cannot be found by id (finish, delete). A claim whose
		// job is not live goes stale and a later put takes it over.
		for i, j := range jobs {
			if inserted[j.Topic] {
				claims[i] = ""
			}
		}
		s.unclaimAll(jobs, claims)
		return err
	}
	for _, j := range jobs {
		s.topicOf.add(j.Seq, j.Topic)
	}
	s.publishPut(ctx, jobs, waited)
	return nil
}

// putFirst is what Put and PutFresh (fresh) do first: check the store
// and the batch, then put jobs of one topic through the put line
// (putInLine). done is false when the jobs are still to be put.
func (s *Store) putFirst(ctx context.Context, jobs []*delayq.Job, fresh bool) (done bool, err error) {
	if err := s.check(); err != nil {
		return true, err
	}
	if len(jobs) == 0 {
		return true, nil
	}
	if err := dupInBatch(jobs); err != nil {
		return true, err
	}
	return s.putInLine(ctx, jobs, fresh)
}

func dupInBatch(jobs []*delayq.Job) error {
	seen := make(map[string]bool, len(jobs))
	for _, j := range jobs {
		if seen[j.ID] {
			return fmt.Errorf("redisstore: put: %w", &delayq.ExistsError{ID: j.ID})
		}
		seen[j.ID] = true
	}
	return nil
}

// insert assigns seqs and runs the per-topic insert scripts. On error,
// inserted names the topics whose jobs are, or may be, live: inserted
// before the failure, or sent to Redis when the reply did not come back.
// On success waited names the topics whose ready count is to be
// published (insertParts).
func (s *Store) insert(ctx context.Context, jobs []*delayq.Job, claims []string, start time.Time) (inserted, waited map[string]bool, err error) {
	first, err := s.takeSeqs(ctx, len(jobs))
	if err != nil {
		return nil, nil, err
	}
	for i, j := range jobs {
		j.Seq = first + uint64(i)
	}
	if err := s.indexPut(ctx, jobs); err != nil {
		return nil, nil, err
	}
	if s.testHookIndexed != nil {
		s.testHookIndexed()
	}
	if time.Since(start) > staleClaim/2 {
		return nil, nil, unavailable("put", fmt.Errorf("took longer than %s before insert; gave up so a stale-claim takeover cannot race it", staleClaim/2))
	}
	inserted, waited = map[string]bool{}, map[string]bool{}
	for _, topic := range topicsOf(jobs) {
		w, err := s.insertTopic(ctx, topic, jobs, claims)
		if err != nil {
			if !errors.Is(err, delayq.ErrExists) { // no definite answer
				inserted[topic] = true
			}
			return inserted, nil, err
		}
		inserted[topic], waited[topic] = true, w
	}
	s.markAgain(ctx, jobs)
	return inserted, waited, nil
}

// markAgain lowers the bucket entries of the topics of jobs once more,
// after their insert, to their earliest delayed due. The mark before the
// insert (indexPut) keeps a crash between the two from leaving a job
// unmarked; but a timer that checks the topic between the two (Tick,
// next: refresh) finds the job not there yet and may raise the entry
// past its due, or drop it, and the job would then fire at the next
// sweep (sweepEvery) instead of its due. One ZADD LT per topic with
// delayed jobs; a put of ready jobs only sends nothing. Best effort: the
// jobs are in and acknowledged, and an entry this fails to lower is
// what the sweep repairs (as after a crash between a transition and its
// mark).
func (s *Store) markAgain(ctx context.Context, jobs []*delayq.Job) {
	earliest := earliestDelayed(jobs)
	if len(earliest) == 0 {
		return
	}
	cmds := make(rueidis.Commands, 0, len(earliest))
	for topic, due := range earliest {
		cmds = append(cmds, s.markDue(topic, due))
	}
	_ = s.doAll(ctx, "put: index", cmds)
}

// earliestDelayed is the earliest due (unix ms) of the delayed jobs of
// each topic among jobs.
func earliestDelayed(jobs []*delayq.Job) map[string]int64 {
	earliest := map[string]int64{}
	for _, j := range jobs {
		if j.State != delayq.StateDelayed {
			continue
		}
		if e, ok := earliest[j.Topic]; !ok || ms(j.Due) < e {
			earliest[j.Topic] = ms(j.Due)
		}
	}
	return earliest
}

// indexPut writes what a put indexes before its insert, in one pipeline:
// seq -> topic, the topics to the registry (those this instance has not
// added within registerEvery) and each topic's bucket entry lowered to
// its earliest delayed due.
func (s *Store) indexPut(ctx context.Context, jobs []*delayq.Job) error {
	return s.indexPutBut(ctx, jobs, nil)
}

// indexPutBut is indexPut without the seq entries of the shards for
// which skip says so (a per-master put's script writes those:
// masterput.go); it sends nothing when nothing is left.
func (s *Store) indexPutBut(ctx context.Context, jobs []*delayq.Job, skip func(shard string) bool) error {
	cmds := make(rueidis.Commands, 0, len(jobs)+4)
	// One HSET per run of jobs in one seq shard: a put's seqs, and a
	// group's, are ascending, and on a Cluster a run of 8 seqs shares a
	// shard.
	for i := 0; i < len(jobs); {
		shard := s.k.seqShard(jobs[i].Seq)
		fv := s.c.B().Hset().Key(shard).FieldValue()
		for ; i < len(jobs) && s.k.seqShard(jobs[i].Seq) == shard; i++ {
			fv = fv.FieldValue(strconv.FormatUint(jobs[i].Seq, 10), jobs[i].Topic)
		}
		if skip == nil || !skip(shard) {
			cmds = append(cmds, fv.Build())
		}
	}
	var register []string
	for _, t := range topicsOf(jobs) {
		if s.registered.due(t) {
			register = append(register, t)
		}
	}
	asked := time.Now()
	if len(register) > 0 {
		cmds = append(cmds, s.c.B().Sadd().Key(s.k.topics()).Member(register...).Build())
	}
	for topic, due := range earliestDelayed(jobs) {
		cmds = append(cmds, s.markDue(topic, due))
	}
	if len(cmds) == 0 {
		return nil
	}
	if err := s.doAll(ctx, "put: index", cmds); err != nil {
		return err
	}
	for _, t := range register {
		s.registered.done(t, asked)
	}
	return nil
}

// markDue lowers topic's entry in its bucket's due index to due (ZADD LT).
// The index may only ever be early, never late: an early entry costs one
// empty tick, a late one would fire jobs late.
func (s *Store) markDue(topic string, due int64) rueidis.Completed {
	return s.c.B().Zadd().Key(s.k.bucketDue(bucketOf(topic, s.opt.Buckets))).Lt().
		ScoreMember().ScoreMember(float64(due), topic).Build()
}

// doAll sends cmds in one pipeline and returns the first error.
func (s *Store) doAll(ctx context.Context, op string, cmds rueidis.Commands) error {
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	rs := s.c.DoMulti(ctx, cmds...)
	if !start.IsZero() {
		s.Committed(start)
	}
	for _, r := range rs {
		if err := r.Error(); err != nil {
			return unavailable(op, err)
		}
	}
	return nil
}

func topicsOf(jobs []*delayq.Job) []string {
	var out []string
	for _, j := range jobs {
		if !slices.Contains(out, j.Topic) {
			out = append(out, j.Topic)
		}
	}
	return out
}

// insertScript inserts the jobs of one or more put calls (a group,
// clusterput.go) into one topic on a Cluster, each call on its own: a call
// with an id live in the topic writes none of its jobs and answers
// EXISTS, and the others go in. A call's ids were claimed before (the
// claim step), or carry their seqs (PutFresh, freshid.go: no claim): a
// fresh call's jobs are found through the seq their ids carry and get
// no K_IDS entry, nor is a fresh id checked there; another call's ids
// are checked in K_IDS (a job put before claims named seqs) and entered
// there. It tells whether ready jobs went in and another instance waits on the
// topic (waitedLua), tested in the same atomic step: the caller
// publishes the ready count only then.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> this instance's id (its own waiting mark does not count)
//	ARGV[2..]  -> per call: number of jobs n, "1" when its ids are fresh
//	              (else "0"); then per job: seq, id, state, index score
//	              and member (placeArgs), its packed record
//	Returns:   per call, in order: "OK", or "EXISTS" followed by the
//	           live id and its state; then 1 when the ready count is to be
//	           published, else 0
var insertScript = newScript(waitedLua + `
-- the writes of all the calls go as one command per key (callIn)
local out, a, recs, ids, zadds, ready = {}, 2, {}, {}, {}, false
while a <= #ARGV do
  local n, fresh, first = tonumber(ARGV[a]), ARGV[a + 1] == '1', a + 2
  a = first + n * 6
  local st, sid, sstate = 'OK', nil, nil
  for i = 0, n - 1 do
    if fresh then break end
    local id = ARGV[first + i * 6 + 1]
    local seq = redis.call('HGET', K_IDS, id)
    if seq then st, sid, sstate = 'EXISTS', id, (load(seq) or {}).state or ''; break end
  end
  if st == 'OK' then
    for i = 0, n - 1 do
      local b = first + i * 6
      local seq, state, score, m = ARGV[b], ARGV[b + 2], ARGV[b + 3], ARGV[b + 4]
      recs[#recs + 1] = K_JOB .. seq
      recs[#recs + 1] = ARGV[b + 5]
      if not fresh then ids[#ids + 1] = ARGV[b + 1]; ids[#ids + 1] = seq end
      gatherPlace(zadds, state, score, m)
      if state == 'ready' then ready = true end
    end
  end
  out[#out + 1] = st
  if sid then out[#out + 1] = sid; out[#out + 1] = sstate end
end
callIn('MSET', nil, recs)
callIn('HSET', K_IDS, ids)
for _, key in ipairs(zadds) do callIn('ZADD', key, zadds[key]) end
out[#out + 1] = (ready and waited(K_B .. 'waiting', ARGV[1])) and 1 or 0
return out
`)

// insertPart is one put call's jobs of one topic, with their claims, for
// insertScript.
type insertPart struct {
	jobs   []*delayq.Job
	claims []string // "" for an id the server made: none (freshid.go)
	fresh  bool     // no K_IDS entry: the ids carry their seqs (PutFresh)
}

// partOf is the part of jobs (claims[i] is job i's) of topic.
func partOf(topic string, jobs []*delayq.Job, claims []string, fresh bool) insertPart {
	p := insertPart{fresh: fresh}
	for i, j := range jobs {
		if j.Topic == topic {
			p.jobs, p.claims = append(p.jobs, j), append(p.claims, claims[i])
		}
	}
	return p
}

// insertParts inserts parts, all of topic, with one insertScript call.
// errs[i] is part i's answer: nil when its jobs went in, its
// *delayq.ExistsError when an id was live and none of them did. err is
// set, and errs nil, when the script failed or its reply was lost: then
// every part may be in. waited is true when ready jobs went in and
// another instance has marked the topic as waited on: their count is to
// be published (publishPut).
func (s *Store) insertParts(ctx context.Context, topic string, parts []insertPart) (errs []error, waited bool, err error) {
	args := []string{s.opt.InstanceID}
	var buf []byte
	for _, p := range parts {
		fresh := "0"
		if p.fresh {
			fresh = "1"
		}
		args = append(args, strconv.Itoa(len(p.jobs)), fresh)
		for i, j := range p.jobs {
			seq := strconv.FormatUint(j.Seq, 10)
			kv := append(jobFields(j), "seq", seq)
			if p.claims[i] != "" { // none for an id the server made
				kv = append(kv, "claim", p.claims[i])
			}
			if !p.fresh {
				kv = append(kv, "ix", "1")
			}
			args = append(append(args, seq, j.ID), placeArgs(j, j.Seq)...)
			buf = appendPacked(buf[:0], kv, 0)
			args = append(args, string(buf))
		}
	}
	arr, err := s.exec(ctx, "put", insertScript, topic, args)
	if err != nil {
		return nil, false, err
	}
	errs = make([]error, len(parts))
	for i := range parts {
		st := ""
		if len(arr) > 0 {
			st, _ = arr[0].ToString()
		}
		switch st {
		case "OK":
			arr = arr[1:]
		case "EXISTS":
			errs[i] = statusErr("put", delayq.Ref{}, arr[:min(3, len(arr))])
			arr = arr[min(3, len(arr)):]
		default:
			return nil, false, unavailable("put", fmt.Errorf("the insert script answered %q for call %d of %d", st, i+1, len(parts)))
		}
	}
	if len(arr) > 0 {
		n, _ := arr[0].AsInt64()
		waited = n == 1
	}
	return errs, waited, nil
}

// insertTopic inserts the jobs of topic among jobs (claims[i] is job
// i's), all or none, and says whether their ready count is to be
// published (insertParts).
func (s *Store) insertTopic(ctx context.Context, topic string, jobs []*delayq.Job, claims []string) (waited bool, err error) {
	errs, waited, err := s.insertParts(ctx, topic, []insertPart{partOf(topic, jobs, claims, false)})
	if err != nil {
		return false, err
	}
	return waited, errs[0]
}

// seqScript hands out n seqs and returns the last. The counter never goes
// below the Redis server's clock in microseconds (TIME), like a hybrid
// logical clock: seqs keep growing however much data Redis loses. After a
// restart without persistence (the counter is gone), a restore of an older
// snapshot or a failover to a replica that lagged (the counter is behind),
// the next seq starts from the clock, which is past every seq handed out
// before, so beanstalkd ids and seqs never repeat. That holds while seqs
// are handed out at under a million a second on average (the counter then
// stays within a batch of the clock) and the Redis clocks do not go back
// by more than the time between the loss and the next put.
//
// Lua numbers are doubles: exact up to 2^53 (9.0e15), while the clock in
// µs is 1.8e15 until the year 2255. string.format('%d') writes the counter
// back in full (tostring would use exponent notation past 14 digits).
//
//	KEYS[1] -> P:seq
//	ARGV[1] -> n, the number of seqs
//	Returns: the last seq handed out
var seqScript = rueidis.NewLuaScript(`
local t = redis.call('TIME')
local clock = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur < clock then cur = clock end
local last = cur + tonumber(ARGV[1])
redis.call('SET', KEYS[1], string.format('%d', last))
return last
`)

// claimScript claims a job id for a topic.
//
//	KEYS[1] -> the id's claim key
//	ARGV[1] -> the claim: "topic|claimed-at-ms|nonce"
//	Returns: 1 when claimed, else the claim that holds the id
var claimScript = rueidis.NewLuaScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then return 1 end
return redis.call('GET', KEYS[1])
`)

// swapScript replaces or deletes a claim only if it is still the one the
// caller saw (a compare-and-swap), so a late cleanup never removes a newer
// put's claim.
//
//	KEYS[1] -> the id's claim key
//	ARGV[1] -> the claim expected
//	ARGV[2] -> the new claim, or "" to delete it
//	Returns: 1 when swapped, 0 otherwise
var swapScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
if ARGV[2] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[2]) end
return 1
`)

// claimAll claims every job's id; on a live conflict it undoes its own
// claims and returns ErrExists naming the id.
func (s *Store) claimAll(ctx context.Context, jobs []*delayq.Job) ([]string, error) {
	if err := s.heldBySeq(ctx, jobs); err != nil {
		return nil, err
	}
	claims, execs := s.newClaims(jobs)
	if err := s.settleClaims(ctx, jobs, claims, execMulti(ctx, s.c, claimScript, execs)); err != nil {
		return nil, err
	}
	return claims, nil
}

// newClaims makes a claim of each job's id ("topic|at|nonce") and the
// claimScript calls that set them.
func (s *Store) newClaims(jobs []*delayq.Job) ([]string, []rueidis.LuaExec) {
	claims := make([]string, len(jobs))
	execs := make([]rueidis.LuaExec, len(jobs))
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	for i, j := range jobs {
		claims[i] = j.Topic + "|" + now + "|" + nonce()
		execs[i] = rueidis.LuaExec{Keys: []string{s.k.claim(j.ID)}, Args: []string{claims[i]}}
	}
	return claims, execs
}

// settleClaims reads the answers rs of the claimScript calls of jobs'
// claims: an id another put holds is taken over when that claim is
// stale (takeOver), else the put fails. On failure it undoes the put's
// own claims (those set, or maybe set) and returns why.
func (s *Store) settleClaims(ctx context.Context, jobs []*delayq.Job, claims []string, rs []rueidis.RedisResult) error {
	var failed error
	for i, r := range rs {
		if failed != nil {
			claims[i] = claimedOrUnknown(r, claims[i])
			continue
		}
		if n, err := r.AsInt64(); err == nil && n == 1 {
			continue
		}
		other, err := r.ToString()
		if err != nil {
			// No answer (a canceled context, a lost reply): the claim
			// may be set. Keep it, so unclaimAll removes it if it is:
			// left behind, it would refuse this id for staleClaim.
			failed = unavailable("put: claim id", err)
			continue
		}
		if failed = s.takeOver(ctx, jobs[i], other, claims[i]); failed == nil {
			continue
		}
		claims[i] = ""
	}
	if failed != nil {
		s.unclaimAll(jobs, claims)
	}
	return failed
}

// claimedOrUnknown is claim when r set it or did not answer (it may have
// set it), "" when r answered that another put holds the id.
func claimedOrUnknown(r rueidis.RedisResult, claim string) string {
	if n, err := r.AsInt64(); err == nil && n == 1 {
		return claim
	}
	if _, err := r.ToString(); err == nil {
		return ""
	}
	return claim
}

// takeOver takes the claim other of j's id when it is stale: older than
// staleClaim and its job is not in the claimed topic. A claim whose job is
// live answers ErrExists. A younger claim whose job is not live belongs
// to a put that has not stored its job yet and may never do so (it may be
// failing right now): that answers ErrUnavailable, to retry, never
// ErrExists. A caller that took "exists" for "stored" (the SDK's retried
// put, a scheduler's takeover) would otherwise lose the job.
func (s *Store) takeOver(ctx context.Context, j *delayq.Job, other, claim string) error {
	exists := func(st string) error {
		return fmt.Errorf("redisstore: put: %w", &delayq.ExistsError{ID: j.ID, State: delayq.State(st)})
	}
	if n := strings.Count(other, "|"); n != 2 && n != 3 {
		return exists("")
	}
	t := claimTarget(other, j.ID)
	_, at, _ := claimParts(other)
	now, keep := s.retainedView()
	st, err := idStateScript.Exec(ctx, s.c, s.k.topic(t.topic).slice(), []string{t.mode, t.ref, now, keep}).ToString()
	if err != nil {
		return unavailable("put: check claim", err)
	}
	if st != "" {
		return exists(st)
	}
	if age := time.Since(time.UnixMilli(at)); age < staleClaim {
		return fmt.Errorf("redisstore: put %q: another put of this id, %s old, has not stored its job yet; retry: %w",
			j.ID, age.Round(time.Millisecond), delayq.ErrUnavailable)
	}
	n, err := swapScript.Exec(ctx, s.c, []string{s.k.claim(j.ID)}, []string{other, claim}).AsInt64()
	if err != nil {
		return unavailable("put: take over claim", err)
	}
	if n != 1 {
		return exists("")
	}
	return nil
}

// heldBySeq answers ErrExists, with the job's state, when the id of a
// job among jobs carries a seq (freshid.go: someone puts an id the
// server made) whose job has that id and is live, or retained and
// within the window; a put claims the id only after. A producer's own
// id that carries a seq by chance (1 in 4096 UUIDv7s) names a seq with
// no job or another one, and is claimed as any other id. The remaining
// race: an id guessed and put before the server makes it for one of its
// jobs (docs/redis.md).
func (s *Store) heldBySeq(ctx context.Context, jobs []*delayq.Job) error {
	for _, j := range jobs {
		seq, ok := freshSeq(j.ID)
		if !ok {
			continue
		}
		topic, err := s.seqTopic(ctx, seq)
		if errors.Is(err, delayq.ErrNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		now, keep := s.retainedView()
		st, err := idStateScript.Exec(ctx, s.c, s.k.topic(topic).slice(), []string{"p", freshRef(seq, j.ID), now, keep}).ToString()
		if err != nil {
			return unavailable("put: check id", err)
		}
		if st != "" {
			return fmt.Errorf("redisstore: put: %w", &delayq.ExistsError{ID: j.ID, State: delayq.State(st)})
		}
	}
	return nil
}

// idStateScript says what holds an id in a topic: the state of its live
// job, else that of its retained job visible at now, else "".
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[1]    -> "i" (by id) or "p" (by the seq its claim names, "<seq>|<id>")
//	ARGV[2]    -> the id, or "<seq>|<id>"
//	ARGV[3]    -> now (unix ms), by the retention's clock
//	ARGV[4]    -> the retention (ms)
//	Returns:   the state, or ""
var idStateScript = newReadScript(`
local seq, j = find(ARGV[1], ARGV[2])
if not seq and tonumber(ARGV[4]) > 0 then seq, j = findRetained(ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])) end
if not seq then return '' end
return j.state
`)

// unclaimAll drops the claims made by a put that failed. Best effort: a
// claim left behind is stale and is taken over by a later put.
func (s *Store) unclaimAll(jobs []*delayq.Job, claims []string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	for i, j := range jobs {
		if claims[i] != "" {
			s.unclaim(ctx, j.ID, claims[i])
		}
	}
}

func (s *Store) unclaim(ctx context.Context, id, claim string) {
	swapScript.Exec(ctx, s.c, []string{s.k.claim(id)}, []string{claim, ""})
}

// claimParts splits a claim "topic|claimed-at-ms|nonce[|seq]" into its
// topic, when it was made, and the seq of its job when it names one (a
// claim a one-node put made in its script, which knew the seq).
func claimParts(claim string) (topic string, at int64, seq string) {
	parts := strings.Split(claim, "|")
	if len(parts) < 3 || len(parts) > 4 {
		return parts[0], 0, ""
	}
	at, _ = strconv.ParseInt(parts[1], 10, 64)
	if len(parts) == 4 {
		seq = parts[3]
	}
	return parts[0], at, seq
}
