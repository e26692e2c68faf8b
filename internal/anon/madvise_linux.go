package anon

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// adviseHuge asks for transparent huge pages; the advice is best effort
// (EINVAL on kernels without THP is ignored).
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }

// populate faults b's pages in for writing (MADV_POPULATE_WRITE, Linux 5.14+)
// without changing their contents.
func populate(b []byte) error { return unix.Madvise(b, unix.MADV_POPULATE_WRITE) }

// yieldCPU has the calling goroutine's thread run at the lowest CPU
// priority for as long as the goroutine lives: it locks the goroutine to its
// thread, which then serves no other goroutine and ends with it, and puts
// that thread in the SCHED_IDLE class (nice 19 as well, which is what stays
// where SCHED_IDLE is refused). The Prefaulter's page faulting — the kernel
// zeroing fresh pages, on a virtual machine whose host takes back free
// memory a CPU-second or more per GB — then runs only on CPU time the run's
// other threads leave, rather than beside them at a share of its own
// (docs/measurements.md, wave 4 sessions 11 and 12). Best effort: a refused
// setpriority or sched_setattr leaves that setting as it was.
func yieldCPU() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
	_ = unix.SchedSetAttr(0, &unix.SchedAttr{Size: unix.SizeofSchedAttr, Policy: unix.SCHED_IDLE}, 0)
}
