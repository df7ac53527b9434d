package engine

import (
	"context"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/store"
)

// Resume ends topic's pause at once (HTTP's resume; beanstalkd has only
// timed pauses) and wakes the reserves waiting on it. Resuming a topic
// that is not paused does nothing.
func (e *Engine) Resume(ctx context.Context, topic string) error {
	if err := delayq.CheckTopic(topic); err != nil {
		return err
	}
	if err := e.st.Pause(ctx, store.PauseParams{Topic: topic}); err != nil {
		return e.recordAdmin("resume", err)
	}
	e.waiters.wakeAll(topic)
	return e.recordAdmin("resume", nil)
}
