package redisstore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
)

// Grouped puts on a Cluster.
//
// Concurrent one-topic Put and PutFresh calls on a Cluster go through a
// line as on one node (putgroup.go), one line per topic (putLineOf), two
// groups in flight at a time (clusterPutsInFlight): the calls of a topic
// that arrive while both are in flight are written together. A Cluster script touches one slot only, so a group
// is written step by step as a lone multi-step put is (put.go), each
// step for the whole group at once: the seqs (one block), the id claims
// (a claimScript per id of Put, in one pipeline; PutFresh's claims go
// with the next step), the index pipeline (the fresh claims, one HSET
// per seq shard, the registry, the bucket mark), ONE insertScript with
// every call's jobs, the second bucket mark (markAgain), and one
// wake-up: the group's ready count (only when the insert script found
// another instance waiting on the topic, notify.go) and its earliest
// due. A group of k
// calls pays Redis one script call, one HSET and one SPUBLISH instead
// of k each (the claims stay one per id: each id is its own slot).
//
// Each call keeps its own answer, as when it went alone: an id another
// put holds fails that call only (ErrExists, or the takeover of a stale
// claim, put.go); an id live in the topic fails only its call, which
// writes none of its jobs; a call whose insert was sent without an
// answer reports the error and keeps its claims (its jobs may be live).
// A failure of a step the whole group shares (the seqs, the index
// pipeline) fails every call still in it, whose claims are removed. Two
// calls of one id never share a group, and a caller that gives up while
// it waits in line is never written (store.Line).

// writeClusterPuts writes a group of put calls on a Cluster and sets
// each call's answer.
func (s *Store) writeClusterPuts(ctx context.Context, calls []*putCall) {
	if err := s.check(); err != nil {
		failCalls(calls, err)
		return
	}
	start := time.Now()
	n := 0
	for _, c := range calls {
		n += len(c.jobs)
	}
	first, err := s.takeSeqs(ctx, n)
	if err != nil {
		failCalls(calls, err)
		return
	}
	seq := first
	for _, c := range calls {
		for _, j := range c.jobs {
			j.Seq = seq
			if c.fresh {
				j.ID = freshID(j.ID, seq) // carries its seq: no claim (freshid.go)
			}
			seq++
		}
	}
	s.insertClusterCalls(ctx, s.claimCalls(ctx, calls), start)
}

// insertClusterCalls writes calls, all of one topic, whose jobs have
// their seqs and claims, step by step from the index pipeline on, and
// sets each call's answer. start is when the group began (a claim older
// than staleClaim/2 may be taken over).
func (s *Store) insertClusterCalls(ctx context.Context, calls []*putCall, start time.Time) {
	var jobs []*delayq.Job
	for _, c := range calls {
		jobs = append(jobs, c.jobs...)
	}
	if len(calls) == 0 {
		return
	}
	if err := s.indexPut(ctx, jobs); err != nil {
		for _, c := range calls {
			c.err = err
			s.unclaimAll(c.jobs, c.claims)
		}
		return
	}
	if s.testHookIndexed != nil {
		s.testHookIndexed()
	}
	if time.Since(start) > staleClaim/2 {
		// Put's claims may be taken over from now on (fresh ones never
		// are: no other put names those ids).
		calls = s.dropCalls(calls, func(c *putCall) error {
			if c.fresh {
				return nil
			}
			s.unclaimAll(c.jobs, c.claims)
			return unavailable("put", fmt.Errorf("took longer than %s before insert; gave up so a stale-claim takeover cannot race it", staleClaim/2))
		})
	}
	waited := s.insertCalls(ctx, calls)
	var in []*delayq.Job
	for _, c := range calls {
		if c.err == nil {
			for _, j := range c.jobs {
				s.topicOf.add(j.Seq, j.Topic)
			}
			in = append(in, c.jobs...)
		}
	}
	if len(in) > 0 {
		s.markAgain(ctx, in)
		s.publishPut(ctx, in, map[string]bool{calls[0].jobs[0].Topic: waited})
	}
}

// claimCalls makes the claims of calls' ids: Put's by claimScript, all
// in one pipeline, each call's answers read as claimAll reads them,
// after the check of the ids that carry a seq (heldBySeq); PutFresh's
// ids carry their seqs and need none. It returns the calls still going;
// the others have their answer and none of their claims left.
func (s *Store) claimCalls(ctx context.Context, calls []*putCall) []*putCall {
	calls = s.dropCalls(calls, func(c *putCall) error {
		if c.fresh {
			return nil
		}
		return s.heldBySeq(ctx, c.jobs)
	})
	var execs []rueidis.LuaExec
	for _, c := range calls {
		if c.fresh {
			c.claims = make([]string, len(c.jobs)) // none
			continue
		}
		var ex []rueidis.LuaExec
		c.claims, ex = s.newClaims(c.jobs)
		execs = append(execs, ex...)
	}
	if len(execs) == 0 {
		return calls
	}
	rs := execMulti(ctx, s.c, claimScript, execs)
	return s.dropCalls(calls, func(c *putCall) error {
		if c.fresh {
			return nil
		}
		mine := rs[:len(c.jobs)]
		rs = rs[len(c.jobs):]
		return s.settleClaims(ctx, c.jobs, c.claims, mine)
	})
}

// dropCalls answers each call for which check returns an error with it
// and returns the others, in order. check removes, or has removed, the
// claims of a call it fails.
func (s *Store) dropCalls(calls []*putCall, check func(c *putCall) error) []*putCall {
	out := calls[:0:0]
	for _, c := range calls {
		if c.err = check(c); c.err == nil {
			out = append(out, c)
		}
	}
	return out
}

// insertCalls inserts the jobs of calls, all of one topic, with one
// insertScript, and sets each call's answer: nil when its jobs went in,
// its ExistsError (its claims removed) when an id of it was live in the
// topic, or the error of a script that failed or whose reply was lost
// (its claims kept: its jobs may be live). waited is true when the
// group's ready count is to be published (insertParts).
func (s *Store) insertCalls(ctx context.Context, calls []*putCall) (waited bool) {
	if len(calls) == 0 {
		return false
	}
	parts := make([]insertPart, len(calls))
	for i, c := range calls {
		parts[i] = insertPart{jobs: c.jobs, claims: c.claims, fresh: c.fresh}
	}
	errs, waited, err := s.insertParts(ctx, calls[0].jobs[0].Topic, parts)
	for i, c := range calls {
		if err != nil {
			c.err = err
			continue
		}
		if c.err = errs[i]; c.err != nil {
			s.unclaimAll(c.jobs, c.claims)
		}
	}
	return waited
}
