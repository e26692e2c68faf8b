//go:build (!amd64 && !arm64) || purego

package kernels

func bestImpl() *implementation { return refImpl }

func nativeImpls() []*implementation { return nil }
