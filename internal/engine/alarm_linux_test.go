package engine

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPreciseAlarmBackstop: with its timerfd disarmed behind its back, the
// precise alarm still rings, through its time.Timer backstop.
func TestPreciseAlarmBackstop(t *testing.T) {
	a, ok := newAlarm().(*fdAlarm)
	if !ok {
		t.Skip("no timerfd here")
	}
	defer a.Close()
	at := time.Now().Add(10 * time.Millisecond)
	a.Set(at)
	if err := unix.TimerfdSettime(a.fd, 0, &unix.ItimerSpec{}, nil); err != nil { // disarm
		t.Fatal(err)
	}
	ringWithin(t, a, 10*time.Second)
	if now := time.Now(); now.Before(at.Add(backstopSlack)) {
		t.Errorf("rang %s after the time set; only the backstop (%s) could ring", now.Sub(at), backstopSlack)
	}
}
