package redisstore

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestOneNodeReserveOfManyTopicsPeeksOnce: on one node a reserve of
// several topics reads every topic's best ready jobs with one script (one
// EVALSHA_RO in INFO commandstats, where it was one per topic), and still
// takes the best jobs across them in serving order, a paused topic's
// left alone.
func TestOneNodeReserveOfManyTopicsPeeksOnce(t *testing.T) {
	addrs := privateRedis(t)
	admin, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	s := openStore(t, addrs, Options{Volatile: true})
	defer s.Close()
	ctx := t.Context()
	// Five topics, two jobs each; priorities interleave across topics.
	var topics []string
	var jobs []*delayq.Job
	for k := range 5 {
		topic := fmt.Sprintf("m%d", k)
		topics = append(topics, topic)
		for i := range 2 {
			j := hjob(fmt.Sprintf("%s-%d", topic, i), topic)
			j.Priority = uint32(10*i + k) // serving order m0-0, m1-0, ... m4-0, m0-1, ...
			jobs = append(jobs, j)
		}
	}
	for _, j := range jobs {
		if err := s.Put(ctx, []*delayq.Job{j}); err != nil {
			t.Fatal(err)
		}
	}
	now := hat(1000)
	if err := s.Pause(ctx, store.PauseParams{Topic: "m1", Until: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	// Redis learns the script first (a reserve of two empty topics), so
	// the count below is not doubled by its first NOSCRIPT and EVAL_RO.
	if _, err := s.Reserve(ctx, store.ReserveParams{Topics: []string{"e1", "e2"}, Max: 1, Now: now, By: "w"}); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, admin.B().ConfigResetstat().Build()).Error(); err != nil {
		t.Fatal(err)
	}
	got, err := s.Reserve(ctx, store.ReserveParams{Topics: topics, Max: 6, Now: now, By: "w"})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if want := "m0-0,m2-0,m3-0,m4-0,m0-1,m2-1"; strings.Join(ids, ",") != want {
		t.Errorf("Reserve(5 topics, max 6) = %v, want %s (m1 paused)", ids, want)
	}
	stats := ok(admin.Do(ctx, admin.B().Info().Section("commandstats").Build()).ToString())(t)
	if peeks := cmdCalls(stats, "evalsha_ro") + cmdCalls(stats, "eval_ro"); peeks != 1 {
		t.Errorf("read-only scripts run = %d, want 1 for a reserve of %d topics", peeks, len(topics))
	}
}
