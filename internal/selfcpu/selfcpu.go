// Package selfcpu reads this process's CPU time, for the benchmarks that
// report CPU per operation beside (or instead of) the wall time, which a
// shared machine's load moves more.
package selfcpu

import (
	"syscall"
	"time"
)

// Times is this process's user and system CPU time so far (getrusage:
// every thread, to the microsecond); zero if it cannot be read.
func Times() (user, sys time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}

// Total is Times' sum.
func Total() time.Duration {
	user, sys := Times()
	return user + sys
}
