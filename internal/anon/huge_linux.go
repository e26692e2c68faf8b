package anon

import "golang.org/x/sys/unix"

// adviseHuge asks for transparent huge pages; the advice is best effort
// (EINVAL on kernels without THP is ignored).
func adviseHuge(b []byte) { _ = unix.Madvise(b, unix.MADV_HUGEPAGE) }
