//go:build unix

package qwen35moe

import "syscall"

// processCPUSeconds is this process's user+system CPU time, so benchmarks
// can report CPU time per operation on a machine shared with others.
func processCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}
