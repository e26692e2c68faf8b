// Package affinity pins the process to a set of CPUs (pipe run --cpus).
// Phones mix big and little cores; decode is compute-bound on a warm cache,
// so its threads belong on the big ones. Pin sets the CPU affinity of every
// thread of the process (compute helpers, reader lanes, the runtime's own),
// and the threads the Go runtime starts later inherit it; it also sets
// GOMAXPROCS to the number of CPUs. Linux and Android only; elsewhere Pin
// fails with ErrUnsupported. Nothing here is safe to call concurrently with
// itself; it is meant to run once at start.
package affinity

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrUnsupported: the operating system has no thread CPU affinity.
	ErrUnsupported = errors.New("affinity: CPU pinning is not supported on this OS")
	// ErrList: a CPU list does not parse.
	ErrList = errors.New("affinity: bad CPU list")
)

// maxCPU bounds CPU numbers (the kernel's CPU_SETSIZE).
const maxCPU = 1024

// ParseList parses a CPU list such as "4-7" or "0,2,4-7" (the taskset -c /
// cpuset syntax) into sorted, distinct CPU numbers. "" gives nil.
func ParseList(s string) ([]int, error) {
	if s == "" {
		return nil, nil
	}
	var seen [maxCPU]bool
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := cpuNumber(lo)
		if err != nil {
			return nil, fmt.Errorf("%w: %q: %w", ErrList, s, err)
		}
		b := a
		if isRange {
			if b, err = cpuNumber(hi); err != nil {
				return nil, fmt.Errorf("%w: %q: %w", ErrList, s, err)
			}
			if b < a {
				return nil, fmt.Errorf("%w: %q: range %s is backwards", ErrList, s, part)
			}
		}
		for c := a; c <= b; c++ {
			seen[c] = true
		}
	}
	var cpus []int
	for c, ok := range seen {
		if ok {
			cpus = append(cpus, c)
		}
	}
	return cpus, nil
}

func cpuNumber(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || v < 0 || v >= maxCPU {
		return 0, fmt.Errorf("%q is not a CPU number in 0..%d", s, maxCPU-1)
	}
	return v, nil
}
