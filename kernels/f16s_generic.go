//go:build !(amd64 || arm64) || purego

package kernels

func fp32ToFP16s(dst []uint16, src []float32) { refFP32ToFP16s(dst, src) }
