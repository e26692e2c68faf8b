package affinity

import (
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
