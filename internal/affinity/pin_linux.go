package affinity

import (
	"fmt"
	"os"
	"runtime"
	"strconv"

	"golang.org/x/sys/unix"
)

// Pin restricts every thread of the process to cpus and sets GOMAXPROCS to
// len(cpus). The kernel refuses (EINVAL) a set with no CPU the process may
// use (offline, or outside its cpuset, as Android's cpusets for background
// apps are).
func Pin(cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("%w: no CPUs", ErrList)
	}
	var set unix.CPUSet
	for _, c := range cpus {
		if c < 0 || c >= maxCPU {
			return fmt.Errorf("%w: CPU %d", ErrList, c)
		}
		set.Set(c)
	}
	// Threads started while a pass runs may clone an unpinned one; repeat
	// until a pass finds every thread pinned already.
	for pass := 0; pass < 10; pass++ {
		changed, err := pinAll(&set)
		if err != nil {
			return fmt.Errorf("affinity: CPUs %v: %w", cpus, err)
		}
		if !changed {
			runtime.GOMAXPROCS(len(cpus))
			return nil
		}
	}
	return fmt.Errorf("affinity: CPUs %v: threads kept appearing unpinned", cpus)
}

// pinAll sets the affinity of each thread not yet on set; changed reports
// whether any was.
func pinAll(set *unix.CPUSet) (changed bool, err error) {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return false, err
	}
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var cur unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &cur); err == nil && cur == *set {
			continue
		}
		if err := unix.SchedSetaffinity(tid, set); err != nil {
			if err == unix.ESRCH {
				continue // the thread exited
			}
			return false, fmt.Errorf("thread %d: %w", tid, err)
		}
		changed = true
	}
	return changed, nil
}
