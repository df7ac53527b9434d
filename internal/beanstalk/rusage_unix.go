//go:build unix

package beanstalk

import (
	"syscall"
	"time"
)

// rusage returns the process's user and system CPU time.
func rusage() (user, sys time.Duration) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
