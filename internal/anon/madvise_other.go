//go:build !linux

package anon

import "errors"

// adviseHuge is a no-op where the kernel has no MADV_HUGEPAGE.
func adviseHuge([]byte) {}

// populate is unsupported where the kernel has no MADV_POPULATE_WRITE.
func populate([]byte) error { return errors.ErrUnsupported }

// yieldCPU is a no-op where per-thread priorities are not set.
func yieldCPU() {}
