package anon

import "unsafe"

// Populate faults in, writable, the whole pages that lie inside s, without
// changing their contents (MADV_POPULATE_WRITE); the partial pages at its
// ends are left alone (they are shared with whatever lies beside s). It is
// for memory that is written a little at a time, where every first write
// into a fresh page would otherwise take a page fault of its own on the
// caller's critical path: one system call over many pages costs a fraction
// of their faults one by one (the development VM's figures are in
// docs/measurements.md, issue 39 session 7). s may be any live slice, on the Go heap or not.
// It returns errors.ErrUnsupported where the kernel has no
// MADV_POPULATE_WRITE and the kernel's error when it refuses; either way the
// pages are left to fault on first write, as without it. A slice holding no
// whole page is a no-op.
func Populate[E any](s []E) error {
	if len(s) == 0 {
		return nil
	}
	n := len(s) * int(unsafe.Sizeof(s[0]))
	p := unsafe.Pointer(&s[0])
	skip := (PageSize - int(uintptr(p)%PageSize)) % PageSize
	whole := (n - skip) &^ (PageSize - 1)
	if n <= skip || whole == 0 {
		return nil
	}
	return populate(unsafe.Slice((*byte)(unsafe.Add(p, skip)), whole))
}
