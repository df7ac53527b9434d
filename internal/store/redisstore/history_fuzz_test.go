package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/delayq/delayq"
)

// encodeAttempt writes an attempt as the scripts do (hstart, hend in
// job.go's prelude): the model the fuzz test checks decodeHistory against.
func encodeAttempt(a delayq.Attempt) (cur, rec string) {
	cur = strconv.Itoa(a.N) + "," + msString(a.Reserved) + "," + strconv.Itoa(len(a.By)) + ":" + a.By
	rec = cur + "," + msString(a.Ended) + "," + string(a.Outcome) + "," + a.Reason
	return cur, strconv.Itoa(len(rec)) + ":" + rec
}

// FuzzDecodeHistory: whatever the record holds, decodeHistory does not
// panic; and the attempts the scripts write, with any by and reason
// (separators included), read back as they were.
func FuzzDecodeHistory(f *testing.F) {
	f.Add("3:abc", "1,2,0:", "alice", "try, later: 3:", 7)
	f.Add("", "", "", "", 1)
	f.Add("12:1,5,1:x,6,released,r", "", "a,b", ",,,", 20)
	f.Fuzz(func(t *testing.T, hist, cur, by, reason string, n int) {
		_, _ = decodeHistory(hist, cur) // must not panic
		at := time.UnixMilli(1_900_000_000_000).UTC()
		done := delayq.Attempt{N: n, Reserved: at, By: by, Ended: at.Add(time.Second), Outcome: delayq.OutcomeReleased, Reason: reason}
		open := delayq.Attempt{N: n + 1, Reserved: at.Add(2 * time.Second), By: reason}
		_, h1 := encodeAttempt(done)
		c2, _ := encodeAttempt(open)
		got, err := decodeHistory(h1+h1, c2)
		if err != nil {
			t.Fatalf("decodeHistory of what the scripts write = %v", err)
		}
		if diff := cmp.Diff([]delayq.Attempt{done, done, open}, got); diff != "" {
			t.Fatalf("round trip (-want +got):\n%s", diff)
		}
	})
}
