package anon

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages; the advice is best effort
// (EINVAL on kernels without THP is ignored).
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }

// populate faults b's pages in for writing (MADV_POPULATE_WRITE, Linux 5.14+)
// without changing their contents.
func populate(b []byte) error { return unix.Madvise(b, unix.MADV_POPULATE_WRITE) }
