package redisstore

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

var _ store.Cluster = (*Store)(nil)

// Instances lists the live instances of the deployment for GET
// /v1/cluster: each one's advertised URL, protocols, the timer buckets it
// leases and since when it runs, sorted by URL.
func (s *Store) Instances(ctx context.Context) ([]delayq.Instance, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	now := strconv.FormatInt(nowMS(), 10)
	ids, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.k.instances()).Min(now).Max("+inf").Byscore().Build()).AsStrSlice()
	if err != nil {
		return nil, unavailable("cluster", err)
	}
	owners, err := s.owners(ctx)
	if err != nil {
		return nil, err
	}
	cmds := make(rueidis.Commands, len(ids))
	for i, id := range ids {
		cmds[i] = s.c.B().Hgetall().Key(s.k.instance(id)).Build()
	}
	out := []delayq.Instance{}
	for i, r := range s.c.DoMulti(ctx, cmds...) {
		m, err := r.AsStrMap()
		if err != nil {
			return nil, unavailable("cluster", err)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, instance(m, owners[ids[i]]))
	}
	slices.SortFunc(out, func(a, b delayq.Instance) int { return strings.Compare(a.URL, b.URL) })
	return out, nil
}

func instance(m map[string]string, buckets []int) delayq.Instance {
	in := delayq.Instance{URL: m["url"], Buckets: buckets}
	if m["protocols"] != "" {
		in.Protocols = strings.Split(m["protocols"], ",")
	}
	if v, err := strconv.ParseInt(m["since"], 10, 64); err == nil {
		in.Since = fromMS(v)
	}
	return in
}

// owners maps instance id to the buckets it leases.
func (s *Store) owners(ctx context.Context) (map[string][]int, error) {
	cmds := make(rueidis.Commands, s.opt.Buckets)
	for b := range cmds {
		cmds[b] = s.c.B().Get().Key(s.k.lease(b)).Build()
	}
	out := map[string][]int{}
	for b, r := range s.c.DoMulti(ctx, cmds...) {
		id, err := r.ToString()
		if rueidis.IsRedisNil(err) {
			continue
		}
		if err != nil {
			return nil, unavailable("cluster", err)
		}
		out[id] = append(out[id], b)
	}
	return out, nil
}

// Buckets returns the timer buckets this instance leases now.
func (s *Store) Buckets() []int { return s.leases.held() }

// InstanceID returns the id this instance uses in leases and events.
func (s *Store) InstanceID() string { return s.opt.InstanceID }

// putFreshSteps is PutFresh of jobs of several topics, on a Cluster or
// on one node. The ids were made just now, so none can be taken: each
// job's id is replaced with one that carries its seq (taken from this
// instance's block first, seqs.go; freshid.go), which needs no claim.
// The seq -> topic entries, the bucket marks and, once a minute per
// topic, the topic registry go in one pipeline; then one script per
// topic writes the records and indexes, with no K_IDS entry (the id
// names the seq). Against Put that is a claim script per job and an
// HGET, an HSET and a SADD fewer per job, and one round trip fewer. A
// crash before the insert leaves seq entries that name no job: readers
// find no job there (docs/redis.md), and the id is never put again.
func (s *Store) putFreshSteps(ctx context.Context, jobs []*delayq.Job) error {
	first, err := s.takeSeqs(ctx, len(jobs))
	if err != nil {
		return err
	}
	for i, j := range jobs {
		j.Seq = first + uint64(i)
		j.ID = freshID(j.ID, j.Seq)
	}
	claims := make([]string, len(jobs)) // none
	if err := s.indexPut(ctx, jobs); err != nil {
		return err
	}
	topics := topicsOf(jobs)
	if s.testHookIndexed != nil {
		s.testHookIndexed()
	}
	waited := map[string]bool{}
	for _, topic := range topics {
		_, w, err := s.insertParts(ctx, topic, []insertPart{partOf(topic, jobs, claims, true)})
		waited[topic] = w
		if err != nil {
			// The topics before this one are in; this one's insert may
			// have run (its reply was lost). The seq entries of the
			// rest name no job, as after a crash.
			return err
		}
	}
	s.markAgain(ctx, jobs)
	for _, j := range jobs {
		s.topicOf.add(j.Seq, j.Topic)
	}
	s.publishPut(ctx, jobs, waited)
	return nil
}
