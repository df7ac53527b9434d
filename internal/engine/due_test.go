package engine

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/delayq/delayq"
)

// TestFiredHook: after a timer step, Fired hears each topic's promoted
// delayed jobs with their lateness; jobs made ready otherwise are not
// fires.
func TestFiredHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		got := map[string][]time.Duration{}
		h := start(t, Config{Fired: func(topic string, ds []time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			got[topic] = append(got[topic], ds...)
		}})
		d1, d2 := time.Second, 2*time.Second
		h.put(PutRequest{Topic: "a", Delay: &d1})
		h.put(PutRequest{Topic: "a", Delay: &d2})
		h.put(PutRequest{Topic: "b", Delay: &d1})
		h.put(PutRequest{Topic: "b"}) // ready at once: not a fire
		time.Sleep(3 * time.Second)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if len(got["a"]) != 2 || len(got["b"]) != 1 || len(got) != 2 {
			t.Fatalf("Fired heard %v, want two fires of a and one of b", got)
		}
		for topic, ds := range got {
			if slices.ContainsFunc(ds, func(d time.Duration) bool { return d < 0 || d >= time.Second }) {
				t.Errorf("latenesses of %s = %v, want each in [0, 1s)", topic, ds)
			}
		}
	})
}

// TestDueCounts: the engine counts from now and refuses bad bounds with
// bad_within, bad topics with bad_topic.
func TestDueCounts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := start(t, Config{})
		for _, d := range []time.Duration{30 * time.Second, 10 * time.Minute, 5 * time.Hour} {
			h.put(PutRequest{Delay: &d})
		}
		counts, now, err := h.e.DueCounts(context.Background(), "t", []time.Duration{time.Minute, time.Hour, 24 * time.Hour})
		if err != nil || !slices.Equal(counts, []int{1, 2, 3}) || !now.Equal(time.Now()) {
			t.Errorf("DueCounts = %v at %s, %v; want [1 2 3] at now", counts, now, err)
		}
		for _, tc := range []struct {
			topic  string
			bounds []time.Duration
			code   string
		}{
			{"t", nil, CodeBadWithin},
			{"t", make([]time.Duration, MaxDueBounds+1), CodeBadWithin},
			{"t", []time.Duration{time.Minute, 0}, CodeBadWithin},
			{"t", []time.Duration{-time.Second}, CodeBadWithin},
			{"t", []time.Duration{MaxDueBound + time.Millisecond}, CodeBadWithin},
			{"-t", []time.Duration{time.Minute}, delayq.CodeBadTopic},
		} {
			if _, _, err := h.e.DueCounts(context.Background(), tc.topic, tc.bounds); delayq.CodeOf(err) != tc.code {
				t.Errorf("DueCounts(%q, %v) = %v, want code %s", tc.topic, tc.bounds, err, tc.code)
			}
		}
	})
}
