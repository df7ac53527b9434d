package redisstore

import (
	"fmt"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// TestClusterPutRacingATickStaysMarked: a multi-step put (a Cluster's)
// marks the topic's timer bucket before it inserts its jobs. A timer
// that checks the topic between the two finds the job not there yet and
// drops (or raises) the entry; the put marks it again after the insert,
// so the job still fires at its due, not at the next sweep 30 s later.
func TestClusterPutRacingATickStaysMarked(t *testing.T) {
	addrs := redisAddrs(t, "DELAYQ_TEST_REDIS_CLUSTER")
	for _, fresh := range []bool{false, true} {
		t.Run(fmt.Sprintf("fresh=%v", fresh), func(t *testing.T) {
			s := openStore(t, addrs, Options{})
			defer s.Close()
			ctx := t.Context()
			now := delayq.TruncMilli(time.Now())
			due := now.Add(time.Hour)
			j := readyIn("racer", "t")
			j.State, j.Due = delayq.StateDelayed, due
			// The timer steps between the put's mark and its insert: it
			// finds nothing in the topic and drops the entry.
			s.testHookIndexed = func() {
				if _, err := s.Tick(ctx, store.TickParams{Now: now}); err != nil {
					t.Error(err)
				}
			}
			put := s.Put
			if fresh {
				put = s.PutFresh
			}
			if err := put(ctx, []*delayq.Job{j}); err != nil {
				t.Fatal(err)
			}
			s.testHookIndexed = nil
			res, err := s.Tick(ctx, store.TickParams{Now: due})
			if err != nil {
				t.Fatal(err)
			}
			if res.Ready["t"] != 1 {
				score, _ := s.c.Do(ctx, s.c.B().Zscore().Key(s.k.bucketDue(bucketOf("t", s.opt.Buckets))).Member("t").Build()).ToString()
				t.Fatalf("Tick at the job's due made %v ready, want t: 1 (the bucket's entry for t: %q, want %d)", res.Ready, score, due.UnixMilli())
			}
		})
	}
}
