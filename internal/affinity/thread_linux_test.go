package affinity

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPUs returns the CPUs thread tid may run on; ok is false when the
// thread exited after /proc/self/task listed it (the test's own locked
// thread ends with its goroutine; under qemu-user the emulator's threads come
// and go too).
func threadCPUs(t *testing.T, tid int) (cpus []int, ok bool) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, false
		}
		t.Fatalf("thread %d: %v", tid, err)
	}
	for c := 0; c < maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus, true
}

// Current returns the CPUs the calling thread may run on.
func Current() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("affinity: %w", err)
	}
	var cpus []int
	for c := 0; c < maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return slices.Clip(cpus), nil
}
