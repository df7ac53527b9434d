package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Key layout 1 (before issue 31) as its one-node put wrote it, kept here
// so the tests can write a store the way an older delayq left it: the
// record a hash of jobFields1 (with seq and claim), the id in the topic's
// ids hash, the claim "topic|at|nonce" without the seq.

// jobFields1 is layout 1's record of j.
func jobFields1(j *delayq.Job, claim string) []string {
	return append([]string{"seq", strconv.FormatUint(j.Seq, 10), "claim", claim}, jobFieldsFull(j)...)
}

// jobFieldsFull is j's record with every field, those at their zero
// too, as layout 1 and layout 2 until issue 31's third round wrote it.
func jobFieldsFull(j *delayq.Job) []string {
	f := []string{
		"id", j.ID, "topic", j.Topic, "body", string(j.Body),
		"pri", strconv.FormatUint(uint64(j.Priority), 10), "ttr", strconv.FormatInt(j.TTR.Milliseconds(), 10),
		"maxatt", strconv.Itoa(j.MaxAttempts), "att", strconv.Itoa(j.Attempts), "state", string(j.State),
		"due", msString(j.Due), "created", msString(j.Created), "delay", strconv.FormatInt(j.Delay.Milliseconds(), 10),
		"res", j.Reservation, "deadline", optMS(j.Deadline), "tmo", strconv.Itoa(j.Timeouts),
		"rel", strconv.Itoa(j.Releases), "bur", strconv.Itoa(j.Buries), "kck", strconv.Itoa(j.Kicks),
	}
	if j.LastReason != "" || !j.LastFailed.IsZero() {
		f = append(f, "lreason", j.LastReason, "lfail", optMS(j.LastFailed))
	}
	return f
}

// putLayout1Script is layout 1's putOneScript, verbatim but for the name.
var putLayout1Script = newScript(`
local n, f, prefix, topic = tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3], ARGV[4]
local stride = 2 + 2 * f
for i = 0, n - 1 do
  if ARGV[8] == '1' then break end
  local id = ARGV[9 + i * stride]
  if redis.call('EXISTS', prefix .. ':id:{' .. id .. '}') == 1 then return {'CLAIMED'} end
  local seq = redis.call('HGET', K_IDS, id)
  if seq then return {'EXISTS', id, redis.call('HGET', K_JOB .. seq, 'state') or ''} end
end
local t = redis.call('TIME')
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local clk = tonumber(t[1]) * 1000000 + tonumber(t[2])
if cur < clk then cur = clk end
redis.call('SET', KEYS[2], string.format('%d', cur + n))
local ready = 0
for i = 0, n - 1 do
  local base = 9 + i * stride
  local id, seq = ARGV[base], string.format('%d', cur + 1 + i)
  redis.call('SET', prefix .. ':id:{' .. id .. '}', ARGV[base + 1])
  redis.call('HSET', prefix .. ':seqs:{' .. string.format('%d', math.floor((cur + 1 + i) / 4096)) .. '}', seq, topic)
  local j = {}
  local args = {'seq', seq}
  for p = base + 2, base + 1 + 2 * f, 2 do
    j[ARGV[p]] = ARGV[p + 1]
    args[#args + 1] = ARGV[p]
    args[#args + 1] = ARGV[p + 1]
  end
  redis.call('HSET', K_JOB .. seq, unpack(args))
  redis.call('HSET', K_IDS, id, seq)
  place(seq, j)
  if j.state == 'ready' then ready = ready + 1 end
end
redis.call('SADD', KEYS[3], topic)
if ARGV[5] ~= '' then
  redis.call('ZADD', KEYS[4], 'LT', ARGV[5], topic)
  redis.call('PUBLISH', ARGV[6], ARGV[7] .. ' - 0 ' .. ARGV[5])
end
if ready > 0 then redis.call('PUBLISH', ARGV[6], ARGV[7] .. ' ' .. topic .. ' ' .. ready .. ' 0') end
return {'OK', string.format('%d', cur + n)}
`)

// putLayout1 writes ready or delayed jobs of one topic under s's prefix
// as layout 1 did, and sets their seqs.
func putLayout1(t *testing.T, c rueidis.Client, k keys, jobs ...*delayq.Job) {
	t.Helper()
	topic := jobs[0].Topic
	var args []string
	f := 0
	for _, j := range jobs {
		claim := topic + "|" + strconv.FormatInt(time.Now().UnixMilli(), 10) + "|" + nonce()
		kv := jobFields1(j, claim)
		kv = kv[2:] // without the seq pair: the script hands seqs out
		f = len(kv) / 2
		args = append(args, j.ID, claim)
		args = append(args, kv...)
	}
	keys := append(k.topic(topic).slice(), k.seqCounter(), k.topics(), k.bucketDue(bucketOf(topic, 16)))
	args = append([]string{strconv.Itoa(len(jobs)), strconv.Itoa(f), k.prefix, topic, "", k.events(), "layout1", "1"}, args...)
	arr, err := putLayout1Script.Exec(t.Context(), c, keys, args).ToArray()
	if err != nil || len(arr) < 2 {
		t.Fatalf("layout 1 put = %v, %v", arr, err)
	}
	last, _ := arr[1].AsInt64()
	for i, j := range jobs {
		j.Seq = uint64(last) - uint64(len(jobs)) + uint64(i) + 1
	}
}

// retainLayout1 writes a retained finished job as layout 1's delete
// script and its global steps (indexEnded) left it: a hash record with a TTL, the id's
// P:{t}:r:<id> key, the ended index, the retained seq key and the claim.
func retainLayout1(t *testing.T, c rueidis.Client, k keys, j *delayq.Job, ended time.Time, keep time.Duration) {
	t.Helper()
	tk, seq, px := k.topic(j.Topic), strconv.FormatUint(j.Seq, 10), keep.Milliseconds()
	att := "1," + msString(ended) + ",2:me," + msString(ended) + ",finished,"
	rec := []string{"id", j.ID, "seq", seq, "topic", j.Topic, "pri", "0", "ttr", "10000", "maxatt", "0", "att", "1",
		"state", "finished", "due", msString(j.Due), "created", msString(j.Created), "delay", "0", "tmo", "0",
		"rel", "0", "bur", "0", "kck", "0", "ended", msString(ended), "hn", "1", "cur", "",
		"hist", strconv.Itoa(len(att)) + ":" + att}
	fv := c.B().Hset().Key(tk[0] + seq).FieldValue()
	for i := 0; i < len(rec); i += 2 {
		fv = fv.FieldValue(rec[i], rec[i+1])
	}
	for _, cmd := range []rueidis.Completed{
		fv.Build(),
		c.B().Pexpire().Key(tk[0] + seq).Milliseconds(px).Build(),
		c.B().Set().Key(tk[9] + j.ID).Value(seq).Px(keep).Build(),
		c.B().Zadd().Key(tk[10]).ScoreMember().ScoreMember(float64(ms(ended)), pad20(j.Seq)).Build(),
		c.B().Set().Key(k.retainedSeq(j.Seq)).Value(j.Topic).Px(keep).Build(),
		c.B().Set().Key(k.claim(j.ID)).Value(j.Topic + "|0|" + nonce()).Px(keep).Build(),
	} {
		if err := c.Do(t.Context(), cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
}

func pad20(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// TestLayout1StoreReadAfterUpgrade: a deployment an older delayq wrote
// (key layout 1: hash records, ids in the topic's ids hash, retained jobs
// by P:{t}:r:<id>) is upgraded in place by the first instance of this
// version (its meta says format 2 after), and every job in it is read,
// listed, counted, reserved, released and finished as before; a record
// that changes is written in layout 2 (a string) and leaves no entry in
// the ids hash once it is gone; ids stay taken.
func TestLayout1StoreReadAfterUpgrade(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS")
	const keep = time.Hour
	helper := openStore(t, addrs, Options{})
	defer helper.Close()
	c, ctx := helper.c, t.Context()
	k := keys{prefix: "t" + nonce()}
	if err := c.Do(ctx, c.B().Hset().Key(k.meta()).FieldValue().FieldValue("buckets", "16").FieldValue("format", "1").Build()).Error(); err != nil {
		t.Fatal(err)
	}
	now := delayq.TruncMilli(time.Now())
	job := func(id string, due time.Time, st delayq.State) *delayq.Job {
		return &delayq.Job{ID: id, Topic: "t", Body: []byte("a body of a hundred bytes, or so, so that layout 1 kept this record as a hashtable ....."),
			TTR: 10 * time.Second, State: st, Due: due, Created: now}
	}
	r, d, old := job("r", now, delayq.StateReady), job("d", now.Add(time.Hour), delayq.StateDelayed), job("old", now, delayq.StateReady)
	putLayout1(t, c, k, r, old)
	putLayout1(t, c, k, d)
	// old goes from live to retained as layout 1's delete left it.
	tk := k.topic("t")
	for _, cmd := range []rueidis.Completed{
		c.B().Del().Key(tk[0] + strconv.FormatUint(old.Seq, 10)).Build(),
		c.B().Hdel().Key(tk.idsKey()).Field("old").Build(),
		c.B().Zrem().Key(tk[2]).Member("0000000000" + pad20(old.Seq)).Build(),
		c.B().Zrem().Key(tk[3]).Member(pad20(old.Seq)).Build(),
		c.B().Hdel().Key(k.seqShard(old.Seq)).Field(strconv.FormatUint(old.Seq, 10)).Build(),
	} {
		if err := c.Do(ctx, cmd).Error(); err != nil {
			t.Fatal(err)
		}
	}
	retainLayout1(t, c, k, old, now.Add(-time.Minute), keep)

	s := openStore(t, addrs, Options{Prefix: k.prefix, Retention: store.Retention{For: keep}})
	defer s.Close()
	if f := ok(c.Do(ctx, c.B().Hget().Key(k.meta()).Field("format").Build()).ToString())(t); f != layoutFormat {
		t.Fatalf("meta format after the first instance of this version = %q, want %q (upgraded)", f, layoutFormat)
	}
	// Every job reads as it was written.
	for _, ref := range []delayq.Ref{{ID: "r"}, {Seq: r.Seq}} {
		if g := ok(s.Get(ctx, ref))(t); g.ID != "r" || g.Seq != r.Seq || string(g.Body) != string(r.Body) || g.State != delayq.StateReady {
			t.Fatalf("Get(%v) = %+v, want layout 1's job r", ref, g)
		}
	}
	if g := ok(s.Get(ctx, delayq.Ref{ID: "d"}))(t); g.State != delayq.StateDelayed || !g.Due.Equal(d.Due) {
		t.Fatalf("Get(d) = %+v, want delayed until %v", g, d.Due)
	}
	for _, ref := range []delayq.Ref{{ID: "old"}, {Seq: old.Seq}} {
		if g := ok(s.Get(ctx, ref))(t); g.State != delayq.StateFinished || len(g.History) != 1 || g.History[0].Outcome != delayq.OutcomeFinished {
			t.Fatalf("Get(%v) of layout 1's retained job = %+v, want finished with its attempt", ref, g)
		}
	}
	if l := ok(s.List(ctx, store.ListParams{Topic: "t", State: delayq.StateFinished}))(t); len(l.Jobs) != 1 || l.Jobs[0].ID != "old" {
		t.Fatalf("List(finished) = %+v, want layout 1's retained job", l.Jobs)
	}
	if st := ok(s.TopicStats(ctx, "t"))(t); st.Ready != 1 || st.Delayed != 1 || !st.OldestReady.Equal(now) {
		t.Fatalf("TopicStats = %+v, want 1 ready (oldest %v), 1 delayed", st, now)
	}
	// Ids stay taken: a live layout 1 job and a retained one.
	for _, id := range []string{"r", "d", "old"} {
		if err := s.Put(ctx, []*delayq.Job{job(id, now, delayq.StateReady)}); !errors.Is(err, delayq.ErrExists) {
			t.Fatalf("Put of layout 1's id %q = %v, want ErrExists", id, err)
		}
	}
	// Transitions work on a layout 1 record, which is then a string.
	got := ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 10, Now: time.Now(), By: "me"}))(t)
	if len(got) != 1 || got[0].ID != "r" || got[0].Attempts != 1 || string(got[0].Body) != string(r.Body) {
		t.Fatalf("Reserve = %+v, want layout 1's job r", got)
	}
	key := tk[0] + strconv.FormatUint(r.Seq, 10)
	if typ := ok(c.Do(ctx, c.B().Type().Key(key).Build()).ToString())(t); typ != "string" {
		t.Fatalf("TYPE of r's record after a reserve = %q, want string (layout 2)", typ)
	}
	ok(s.Release(ctx, store.ReleaseParams{Ref: delayq.Ref{ID: "r", Reservation: got[0].Reservation}, Now: time.Now(), Due: time.Now()}))(t)
	got = ok(s.Reserve(ctx, store.ReserveParams{Topics: []string{"t"}, Max: 10, Now: time.Now(), By: "me"}))(t)
	if len(got) != 1 || got[0].Attempts != 2 || got[0].Releases != 1 {
		t.Fatalf("Reserve after release = %+v, want r's second attempt", got)
	}
	ok(s.Delete(ctx, store.DeleteParams{Ref: delayq.Ref{ID: "r", Reservation: got[0].Reservation}, Now: time.Now()}))(t)
	if n := ok(c.Do(ctx, c.B().Hexists().Key(tk.idsKey()).Field("r").Build()).AsBool())(t); n {
		t.Fatal("the topic's ids hash still names r after it finished")
	}
	if g := ok(s.Get(ctx, delayq.Ref{ID: "r"}))(t); g.State != delayq.StateFinished || len(g.History) != 2 {
		t.Fatalf("Get(r) after finish = %+v, want finished with two attempts", g)
	}
	if err := s.Put(ctx, []*delayq.Job{job("r", now, delayq.StateReady)}); !errors.Is(err, delayq.ErrExists) {
		t.Fatalf("Put of r while it is retained = %v, want ErrExists", err)
	}
}
