package redisstore

import (
	"context"
	"strconv"
	"time"

	"github.com/delayq/delayq/internal/store"
)

var _ store.DueCounter = (*Store)(nil)

// dueCountsScript counts a topic's delayed jobs due at or before each
// limit: one ZCOUNT of the due-ordered delayed set per limit, in one
// script so the counts are of one moment.
//
//	KEYS[1]    -> the topic's key prefix (keys.go)
//	ARGV[i]    -> the i-th limit, unix ms
//	Returns:   {count, ...}, one per limit
var dueCountsScript = newReadScript(`
local out = {}
for i = 1, #ARGV do
  out[i] = redis.call('ZCOUNT', K_DELAYED, '-inf', ARGV[i])
end
return out
`)

// DueCounts implements store.DueCounter with ZCOUNT on the topic's
// delayed set, which is scored by due time: Redis counts a score range in
// O(log n), whatever the number of jobs in it.
func (s *Store) DueCounts(ctx context.Context, topic string, now time.Time, bounds []time.Duration) ([]int, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	counts := make([]int, len(bounds))
	if len(bounds) == 0 {
		return counts, nil
	}
	limits := make([]string, len(bounds))
	for i, b := range bounds {
		limits[i] = strconv.FormatInt(now.UnixMilli()+b.Milliseconds(), 10)
	}
	arr, err := dueCountsScript.Exec(ctx, s.c, s.k.topic(topic).slice(), limits).ToArray()
	if err != nil {
		return nil, unavailable("due counts", err)
	}
	for i := range counts {
		if i < len(arr) {
			n, err := arr[i].AsInt64()
			if err != nil {
				return nil, unavailable("due counts", err)
			}
			counts[i] = int(n)
		}
	}
	return counts, nil
}
