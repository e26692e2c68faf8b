package sysmem

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Rusage is the process's cumulative major faults and CPU time.
func Rusage() (majflt int64, cpu time.Duration) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0
	}
	cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	return ru.Majflt, cpu
}

// ProcReadBytes is the process's cumulative storage read bytes
// (/proc/self/io read_bytes), or -1 when unavailable.
func ProcReadBytes() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return -1
	}
	var v int64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		if n, ok := cutInt(line, "read_bytes: "); ok {
			v = n
		}
	}
	return v
}

// cutInt parses the integer after prefix on line.
func cutInt(line, prefix string) (int64, bool) {
	rest, ok := strings.CutPrefix(line, prefix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64)
	return n, err == nil
}
