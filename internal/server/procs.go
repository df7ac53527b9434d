package server

import (
	"log/slog"
	"os"
	"runtime"
	"sync"
)

// backgroundNice is the nice value of the embedded store's flush and
// compaction threads (diskstore.Options.BackgroundNice): the lowest
// priority, so that on a busy machine the kernel runs the requests and
// the timer first and the flush in what they leave.
const backgroundNice = 19

// A thread the kernel leaves waiting still holds its Go P. With exactly
// as many Ps as CPUs, a low-priority flush would then hold one of the
// two Ps of a 2-CPU machine while not running, and the requests would
// get one P, as they did when the flush ran at full priority. So a
// server on the embedded store runs with one P more than Go's default,
// which is what the one background job at a time (a flush or a
// compaction) needs. A GOMAXPROCS set in the environment is kept as
// given.
var backgroundP sync.Once

// reserveBackgroundP raises GOMAXPROCS by one, once per process, unless
// the environment sets it.
func reserveBackgroundP(log *slog.Logger) {
	backgroundP.Do(func() {
		was := runtime.GOMAXPROCS(0)
		n := backgroundProcs(os.Getenv("GOMAXPROCS"), was)
		if n != was {
			runtime.GOMAXPROCS(n)
		}
		log.Debug("go procs", "gomaxprocs", n, "default", was, "background_nice", backgroundNice)
	})
}

// backgroundProcs is the GOMAXPROCS for a server on the embedded store:
// the current one plus a P for the store's background work, or the
// current one when the environment set it (env is $GOMAXPROCS).
func backgroundProcs(env string, current int) int {
	if env != "" {
		return current
	}
	return current + 1
}
