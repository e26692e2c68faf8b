package affinity

import (
	"fmt"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

func threadCPUs(t *testing.T, tid int) []int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		t.Fatalf("thread %d: %v", tid, err)
	}
	var cpus []int
	for c := 0; c < maxCPU; c++ {
		if set.IsSet(c) {
			cpus = append(cpus, c)
		}
	}
	return cpus
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
