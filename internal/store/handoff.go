package store

import (
	"slices"
	"time"

	"github.com/delayq/delayq"
)

// HandOff serves a Tick's Claim (TickParams.Claim) from made, the jobs
// the Tick has just made ready: it counts them by topic, leaving out
// those paused says are paused, asks claim for the reserves that will
// take them, and reserves for each Take in order up to its Max of the
// jobs of its topics, in priority-then-seq order, as Reserve does at now
// (the store's own clock reading, as its Reserve would take it). It
// returns the jobs taken for each Take (nil when claim is nil or nothing
// was made ready: Claim is not called then) and changes those jobs in
// place; the caller writes them in the Tick's write, which must then be
// durable, and leaves them out of TickResult.Ready (Taken).
func HandOff(made []*delayq.Job, paused func(topic string) bool, claim func(map[string]int) []Take, now time.Time) [][]*delayq.Job {
	if claim == nil {
		return nil
	}
	var free []*delayq.Job
	counts := map[string]int{}
	for _, j := range made {
		if j.State == delayq.StateReady && (paused == nil || !paused(j.Topic)) {
			free = append(free, j)
			counts[j.Topic]++
		}
	}
	if len(free) == 0 {
		return nil
	}
	takes := claim(counts)
	slices.SortFunc(free, func(a, b *delayq.Job) int {
		if a.Priority != b.Priority {
			if a.Priority < b.Priority {
				return -1
			}
			return 1
		}
		if a.Seq < b.Seq {
			return -1
		}
		if a.Seq > b.Seq {
			return 1
		}
		return 0
	})
	taken := make([][]*delayq.Job, len(takes))
	for i, t := range takes {
		begin := BeginTTR(now, t.Now)
		for k := 0; k < len(free) && len(taken[i]) < t.Max; {
			j := free[k]
			if !slices.Contains(t.Topics, j.Topic) {
				k++
				continue
			}
			ApplyReserve(j, ReserveStart(j, begin))
			j.StartAttempt(now, t.By)
			taken[i] = append(taken[i], j)
			free = slices.Delete(free, k, k+1)
		}
	}
	return taken
}

// TakenCount is how many jobs taken holds, by topic: what a Tick that
// handed them off leaves out of TickResult.Ready.
func TakenCount(taken [][]*delayq.Job) map[string]int {
	n := map[string]int{}
	for _, js := range taken {
		for _, j := range js {
			n[j.Topic]++
		}
	}
	return n
}
