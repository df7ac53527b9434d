package redisstore

import (
	"context"
	"fmt"
	"iter"
	"strconv"
	"sync"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Group put on one node (on a Cluster: clusterput.go).
//
// Concurrent one-topic Put calls on a one-node Redis are written
// together (store.Line): one putOneScript call for every call that
// arrived while the group before it was in flight. Redis spent about half
// of a put's CPU on what it pays once per command (reading and parsing
// the EVALSHA and its arguments, running the script's prelude, the
// wake-up tests, writing the reply), not per job
// (issue 31, docs/benchmarks.md). A lone put goes at once, with no timer;
// one group is in flight at a time, so seqs follow the order of the
// writes.
//
// Each call keeps its own answer, as when it went alone: its jobs go in
// all together or not at all; an id claimed already sends that call
// alone down the full path (put.go), which tells a live job from a stale
// claim; an id live in the topic fails that call with its
// *delayq.ExistsError and state. Two calls of one id are never in one
// group: the later waits for the next group, which sees the first one's
// job. A script error fails every call of the group, as it would have
// failed each alone.

// maxPutGroupJobs bounds the jobs of one group script: how long Redis
// runs it (some 10 µs a job, every other client waiting meanwhile) and
// its arguments. 32 concurrent producers gather far fewer per group.
const maxPutGroupJobs = 256

// maxPutGroupBody bounds the body bytes of one group (a call with more
// goes alone): with bodies of up to --max-body each, a group of
// maxPutGroupJobs could otherwise make one command of hundreds of MiB.
const maxPutGroupBody = 4 << 20

// putCall is one one-topic Put waiting for its group's script.
type putCall struct {
	jobs  []*delayq.Job
	fresh bool // PutFresh: the ids are not checked
	body  int  // body bytes

	// The answer, set by writePuts.
	claimed bool  // one node: an id was claimed, nothing written; take the full path
	err     error // when not claimed

	claims []string // on a Cluster: each job's claim, made by the group (clusterput.go)
}

// putLine is the store's line of one-node puts, set up on first use,
// and a Cluster's lines, one per topic (putLineOf).
type putLine struct {
	once sync.Once
	l    store.Line[*putCall]

	mu       sync.Mutex
	byTopic  map[string]*store.Line[*putCall] // guarded by mu
	byMaster map[string]*store.Line[*putCall] // guarded by mu: a Cluster's PutFresh lines (masterput.go)
}

// putLine returns the store's line of one-node puts.
func (s *Store) putLine() *store.Line[*putCall] {
	s.puts.once.Do(func() { s.puts.l = s.newPutLine() })
	return &s.puts.l
}

// putLineOf returns the line of a put of topic: on one node the
// store's one line (putOneScript writes the calls of every topic in one
// script), on a Cluster the topic's own. A Cluster writes a topic's
// calls with one script but each topic with its own, so a line per topic
// shares a script between the calls that can share one, while the puts
// of other topics, which could share none, go on at once instead of
// waiting for the group in flight (with producers spread over many
// topics, one line for all gathered groups of one call per topic and
// only slowed the puts down).
func (s *Store) putLineOf(topic string) *store.Line[*putCall] {
	if s.oneNode {
		return s.putLine()
	}
	return s.puts.lineIn(&s.puts.byTopic, topic, func() *store.Line[*putCall] {
		l := new(store.Line[*putCall])
		*l = s.newPutLine()
		l.InFlight = clusterPutsInFlight
		return l
	})
}

// lineIn returns the line of key in lines (one of p's maps), made by
// newLine when there is none.
func (p *putLine) lineIn(lines *map[string]*store.Line[*putCall], key string, newLine func() *store.Line[*putCall]) *store.Line[*putCall] {
	p.mu.Lock()
	defer p.mu.Unlock()
	if l, ok := (*lines)[key]; ok {
		return l
	}
	if *lines == nil || len(*lines) >= maxPutLines {
		// Start over: a line dropped here still writes the calls in it.
		*lines = make(map[string]*store.Line[*putCall])
	}
	l := newLine()
	(*lines)[key] = l
	return l
}

// maxPutLines bounds a Cluster's put lines (a few hundred bytes each).
const maxPutLines = 4096

// clusterPutsInFlight is how many groups of a topic's puts a Cluster
// writes at a time. A put that waits in line waits for a whole group's
// round trips, and fewer commands in flight at once cost Redis more per
// command (fewer of them per read and write); with one group at a time,
// 33 producers over 30 topics, whose puts rarely share a topic, put a
// third slower and cost the Cluster's Redis more CPU per put than
// without groups. With two, a put waits only behind two of its own
// topic, and 11 producers of one topic still gather groups of about 3
// (0.36 insert scripts per put, `TOPICS=3 scripts/bench-redis.sh
// cluster`).
const clusterPutsInFlight = 2

// newPutLine is a line of puts, not yet used.
func (s *Store) newPutLine() store.Line[*putCall] {
	return store.Line[*putCall]{
		Write:    s.writePuts,
		Ctx:      s.ctx,
		Size:     func(c *putCall) (int, int) { return len(c.jobs), c.body },
		MaxJobs:  maxPutGroupJobs,
		MaxBytes: maxPutGroupBody,
		Joins:    store.DistinctKeys(putIDs),
	}
}

// putIDs are the ids of c's jobs: two calls of one id never share a
// group.
func putIDs(c *putCall) iter.Seq[string] {
	return func(yield func(string) bool) {
		for _, j := range c.jobs {
			if !yield(j.ID) {
				return
			}
		}
	}
}

// writePuts writes a group of calls with one putOneScript call and sets
// each call's answer. ctx is the caller's for a lone call, else the
// store's: a gathered group writes for all its callers (one that gives
// up returns at once, store.Line.Do).
func (s *Store) writePuts(ctx context.Context, calls []*putCall) {
	if !s.oneNode {
		s.writeClusterPuts(ctx, calls)
		return
	}
	if err := s.check(); err != nil {
		failCalls(calls, err)
		return
	}
	n := 0
	for _, c := range calls {
		n += len(c.jobs)
	}
	first, err := s.takeSeqs(ctx, n)
	if err != nil {
		failCalls(calls, err)
		return
	}
	args, asked := s.putArgs(calls, first)
	keys := []string{s.k.topicBase(calls[0].jobs[0].Topic), s.k.topics()}
	var start time.Time
	if s.Observing() {
		start = time.Now()
	}
	var arr []rueidis.RedisMessage
	var serr error
	werr := s.acked(ctx, "put", func(c rueidis.Client) error {
		arr, serr = putOneScript.Exec(ctx, c, keys, args).ToArray()
		return serr
	})
	if serr != nil {
		failCalls(calls, unavailable("put", serr))
		return
	}
	for topic := range asked {
		s.registered.done(topic, asked[topic]) // the script ran
	}
	if !start.IsZero() {
		s.Committed(start)
	}
	seq, k := first, 0
	for _, c := range calls {
		st := ""
		if k < len(arr) {
			st, _ = arr[k].ToString()
		}
		switch st {
		case "CLAIMED":
			c.claimed = true
			k++
		case "OK":
			for _, j := range c.jobs {
				j.Seq = seq
				s.topicOf.add(seq, j.Topic)
				seq++
			}
			c.err = werr
			k++
			continue
		case "EXISTS":
			c.err = statusErr("put", delayq.Ref{}, arr[k:min(k+3, len(arr))])
			k += 3
		default:
			c.err = unavailable("put", fmt.Errorf("the script answered %q for call %d of %d", st, k, len(calls)))
		}
		seq += uint64(len(c.jobs))
	}
}

// failCalls answers every call of a group with err.
func failCalls(calls []*putCall, err error) {
	for _, c := range calls {
		c.err = err
	}
}

// putArgs are putOneScript's arguments for calls, whose jobs take the
// seqs from first on, and the topics it is to add to P:topics, with
// when this instance asked (Store.registered).
func (s *Store) putArgs(calls []*putCall, first uint64) (args []string, asked map[string]time.Time) {
	now := strconv.FormatInt(time.Now().UnixMilli(), 10)
	args = []string{s.k.prefix, s.k.events(), s.opt.InstanceID, s.fan.own()}
	seq := first
	var buf []byte
	for _, c := range calls {
		topic := c.jobs[0].Topic
		var earliest int64
		for _, j := range c.jobs {
			if j.State == delayq.StateDelayed && (earliest == 0 || ms(j.Due) < earliest) {
				earliest = ms(j.Due)
			}
		}
		flags, due := 0, ""
		if c.fresh {
			flags |= 1
		}
		if _, ok := asked[topic]; !ok && s.registered.due(topic) {
			if asked == nil {
				asked = map[string]time.Time{}
			}
			asked[topic], flags = time.Now(), flags|2
		}
		if earliest != 0 {
			due = strconv.FormatInt(earliest, 10)
		}
		args = append(args, topic, strconv.Itoa(len(c.jobs)), strconv.Itoa(flags), s.k.bucketDue(bucketOf(topic, s.opt.Buckets)), due)
		for _, j := range c.jobs {
			sq := strconv.FormatUint(seq, 10)
			claim, chk := "", ""
			if c.fresh {
				// The id carries its seq: no claim (freshid.go).
				j.ID = freshID(j.ID, seq)
			} else {
				claim = topic + "|" + now + "|" + nonce() + "|" + sq
				if fs, ok := freshSeq(j.ID); ok {
					chk = strconv.FormatUint(fs, 10)
				}
			}
			seq++
			args = append(args, j.ID, sq, claim)
			args = append(args, placeArgs(j, seq-1)...)
			args = append(args, s.k.seqShard(seq-1))
			f := append(jobFields(j), "seq", sq)
			if claim != "" {
				f = append(f, "claim", claim)
			}
			buf = appendPacked(buf[:0], f, 0)
			args = append(args, string(buf), chk)
		}
	}
	return args, asked
}
