package engine

import "time"

// alarm wakes the timer loop at the next due time. C rings at or after
// the time last Set; it may also ring early or twice (a ring from before
// a Set), which costs the loop one empty step, never a missed one.
type alarm interface {
	C() <-chan struct{}
	Set(t time.Time)
	Close()
}

// timerAlarm is an alarm on a time.Timer: portable, but on an idle Linux
// process up to a millisecond late (see fdAlarm).
type timerAlarm struct {
	t *time.Timer
	c chan struct{}
}

func newTimerAlarm() *timerAlarm {
	a := &timerAlarm{c: make(chan struct{}, 1)}
	a.t = time.AfterFunc(time.Hour, a.ring)
	return a
}

// ring signals C without blocking; rings coalesce.
func (a *timerAlarm) ring() {
	select {
	case a.c <- struct{}{}:
	default:
	}
}

func (a *timerAlarm) C() <-chan struct{} { return a.c }
func (a *timerAlarm) Set(t time.Time)    { a.t.Reset(max(time.Until(t), 0)) }
func (a *timerAlarm) Close()             { a.t.Stop() }
