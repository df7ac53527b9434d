package redisstore

import "testing"

// TestPausedReadsTheTopicClock: a Cluster's peek of several topics tells
// a paused topic from its pause end and its clock as the scripts do
// (clockRead): the topic's time is the caller's now or the latest now it
// was acted at, whichever is later.
func TestPausedReadsTheTopicClock(t *testing.T) {
	for _, c := range []struct {
		pn   []string
		now  int64
		want bool
	}{
		{[]string{"", ""}, 100, false},       // no pause
		{[]string{"200", ""}, 100, true},     // before the end
		{[]string{"200", ""}, 200, false},    // at the end
		{[]string{"200", "250"}, 100, false}, // the topic's clock is past it
		{[]string{"200", "150"}, 100, true},  // clock before the end
		{[]string{"200", "junk"}, 100, true}, // an unreadable clock counts as unset
		{[]string{"200"}, 100, false},        // not an MGET of two
	} {
		if got := paused(c.pn, c.now); got != c.want {
			t.Errorf("paused(%q, %d) = %v, want %v", c.pn, c.now, got, c.want)
		}
	}
}
