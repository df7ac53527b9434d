package engine

import (
	"context"
	"time"

	"github.com/delayq/delayq"
)

// CodeBadWithin names a due-count request whose bounds are not a short
// list of positive durations; it is delayq.CodeBadWithin, named here too
// for the engine's callers.
const CodeBadWithin = delayq.CodeBadWithin

// Due-count limits: a few bounds, each at most a century ahead, so a
// request stays a handful of index range counts.
const (
	MaxDueBounds = 10
	MaxDueBound  = 100 * 365 * 24 * time.Hour
)

// DueCounts returns, for each bound, how many delayed jobs of topic fall
// due within it from now (those already due but not yet made ready count
// in every bound), and the now it counted from: the due-time
// distribution of the dashboard.
func (e *Engine) DueCounts(ctx context.Context, topic string, bounds []time.Duration) (counts []int, now time.Time, err error) {
	if err := delayq.CheckTopic(topic); err != nil {
		return nil, time.Time{}, err
	}
	if len(bounds) == 0 || len(bounds) > MaxDueBounds {
		return nil, time.Time{}, delayq.Invalid(CodeBadWithin, "within", "%d bounds; give 1 to %d", len(bounds), MaxDueBounds)
	}
	for _, b := range bounds {
		if b <= 0 || b > MaxDueBound {
			return nil, time.Time{}, delayq.Invalid(CodeBadWithin, "within", "%s is not a duration above 0 and at most 100 years", b)
		}
	}
	now = time.Now()
	counts, err = e.st.DueCounts(ctx, topic, now, bounds)
	return counts, now, err
}
