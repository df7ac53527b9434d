//go:build !unix

package beanstalk

import "time"

// rusage is not known on this platform.
func rusage() (user, sys time.Duration) { return 0, 0 }
