//go:build !linux

package anon

// adviseHuge is a no-op where the kernel has no MADV_HUGEPAGE.
func adviseHuge([]byte) {}
