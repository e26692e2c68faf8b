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
// priority (nice 19) for as long as the goroutine lives: it locks the
// goroutine to its thread, which then serves no other goroutine and ends
// with it. The Prefaulter's page faulting (the kernel zeroing and mapping
// pages, a CPU-second per few GB on a virtual machine) then takes the CPUs
// only when the run's compute threads leave them, instead of slowing a
// prompt pass (docs/measurements.md, wave 4 session 11). Best effort: a
// refused setpriority leaves the priority as it was.
func yieldCPU() {
	runtime.LockOSThread()
	_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), 19)
}
