//go:build !unix

package quant

func processCPUSeconds() float64 { return 0 }
