//go:build !amd64 || purego

package kernels

func bestImpl() *implementation { return refImpl }

func nativeImpls() []*implementation { return nil }
