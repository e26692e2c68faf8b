//go:build unix

package grammar

import (
	"syscall"
	"time"
)

// cpuTime is the process's user+system CPU time: on a shared machine the
// benchmark reports it besides the wall time, which other load inflates.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
