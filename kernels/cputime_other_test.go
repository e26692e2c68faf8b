//go:build !unix

package kernels

func processCPUSeconds() float64 { return 0 }
