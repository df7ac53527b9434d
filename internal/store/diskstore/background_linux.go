package diskstore

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// lowerThread locks the calling goroutine to its thread for good (the
// thread ends with the goroutine) and sets that thread's nice value: on
// Linux the nice value is per thread. Lowering one's own priority is
// always allowed; an error leaves the thread as it was, which costs only
// the latency this was for.
func lowerThread(nice int) {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), nice)
}
