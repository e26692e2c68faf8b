//go:build (!amd64 && !arm64) || purego

package kernels

import "runtime"

func bestImpl() *implementation { return refImpl }

func nativeImpls() []*implementation { return nil }

// CPUKey names this CPU's class for the kernel table and cache; with the
// reference alone only the architecture matters.
func CPUKey() string { return runtime.GOARCH + "-generic" }
